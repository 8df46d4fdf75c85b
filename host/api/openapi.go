package api

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"
)

// openAPI describes every route of this API; openapi_test.go fails when a route and
// the description part ways.
//
//go:embed openapi.json
var openAPI []byte

// openAPIHandler serves the OpenAPI 3.1 document of the API.
func openAPIHandler(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(openAPI)
}
