variable "tenant" { type = string }

resource "terraform_data" "broken" {
  input = var.tenant
  this line is not HCL
}
