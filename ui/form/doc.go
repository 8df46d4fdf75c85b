// Package form renders the operator's configuration forms from JSON Schemas, so that no
// app's form is written by hand, and turns the submitted form back into the JSON
// document the schema describes.
//
// Render writes accessible fields (a fieldset per object, a labelled control per value,
// descriptions and server errors linked through aria-describedby) named by the JSON
// pointer of their value; Decode reads a submission of those names back into typed JSON.
// The page wraps the fields in its own <form method="post"> with a submit button, and may
// embed Script, which shows and hides the sections of an app while its enable switch
// changes and adds and removes the rows of lists. Without Script every section still
// submits and every stored row can be edited; adding and removing rows needs it.
//
// The schema subset is what the catalog composes from the apps: type, properties,
// required, items, enum, default, title, description, writeOnly, minimum, maximum,
// multipleOf, minLength, maxLength, pattern, format, minItems, maxItems, uniqueItems,
// local $ref into the document (#/$defs/...), and the annotations x-order,
// x-widget (textarea, password, email, checkboxes) and x-enumTitles. Conditional
// keywords (if/then, allOf, ...) are left to the host's validation.
package form
