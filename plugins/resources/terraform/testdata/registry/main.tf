# A module that needs a provider from the registry, which the provider never asks.
terraform {
  required_providers {
    random = { source = "hashicorp/random" }
  }
}

resource "random_password" "db" {
  length = 32
}
