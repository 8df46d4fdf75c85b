# A postgresql module that forgot its password output.
variable "tenant" { type = string }

output "host" { value = "127.0.0.1" }
output "port" { value = 5432 }
output "database" { value = var.tenant }
output "user" { value = var.tenant }
output "sslmode" { value = "disable" }
