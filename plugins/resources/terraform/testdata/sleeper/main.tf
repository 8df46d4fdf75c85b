# A run that takes long enough to be killed while it holds the state's lock.
terraform {
  backend "http" {}
}

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 120"
  }
}
