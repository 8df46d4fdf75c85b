// Package headers sets the security headers every answer of fedhost carries, the UI's
// pages and the API's JSON alike.
package headers

import "github.com/gofiber/fiber/v2"

// Content security policies: the UI's pages load their own styles, scripts and images;
// the API's answers are data, which nothing may run or frame.
const (
	PageCSP = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	DataCSP = "default-src 'none'; frame-ancestors 'none'"
)

// Set gives c's answer the security headers, with csp as its content security policy:
// no guessing of content types, no framing, no address sent to other sites, and no
// copy kept by a cache (answers hold an operator's data).
func Set(c *fiber.Ctx, csp string) {
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderCacheControl, "no-store")
}

// Middleware sets the headers before the handler runs, which may change them.
func Middleware(csp string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		Set(c, csp)
		return c.Next()
	}
}
