# A database and a role of their own per tenant and instance on a shared PostgreSQL, made
# with psql by local-exec: Terraform's built-in terraform_data, no provider to download.

variable "tenant" { type = string }
variable "instance" { type = string }
variable "extensions" {
  type    = list(string)
  default = []
}
variable "secrets" {
  type      = map(string)
  default   = {}
  sensitive = true
}
variable "new_secret" {
  type      = string
  sensitive = true
}
variable "retain" {
  type    = bool
  default = false
}

# The hosting provider's own, from the provider's settings.
variable "admin_url" {
  type      = string
  sensitive = true
}
variable "pg_host" { type = string }
variable "pg_port" { type = number }

locals {
  name = replace("${var.tenant}_${var.instance}", "-", "_")
  # The password made at the first provision comes back in secrets afterwards.
  password = lookup(var.secrets, "password", var.new_secret)
}

resource "terraform_data" "database" {
  # Extensions are made with the database: another list makes another database, a plan
  # the provider refuses.
  triggers_replace = [local.name, sort(var.extensions)]
  input = {
    name       = local.name
    password   = local.password
    admin_url  = var.admin_url
    extensions = join(",", var.extensions)
    retain     = var.retain
  }

  provisioner "local-exec" {
    command = "${path.module}/create.sh"
    environment = {
      DB         = self.input.name
      PASSWORD   = self.input.password
      ADMIN_URL  = self.input.admin_url
      EXTENSIONS = self.input.extensions
    }
  }

  # With retain the database and role stay, the role unable to log in.
  provisioner "local-exec" {
    when    = destroy
    command = "${path.module}/drop.sh"
    environment = {
      DB        = self.input.name
      ADMIN_URL = self.input.admin_url
      RETAIN    = self.input.retain ? "true" : "false"
    }
  }
}

output "host" { value = var.pg_host }
output "port" { value = var.pg_port }
output "database" { value = terraform_data.database.output.name }
output "user" { value = terraform_data.database.output.name }
output "password" {
  value     = terraform_data.database.output.password
  sensitive = true
}
output "sslmode" { value = "disable" }
