// Package conformance runs the standard checks of fedhost plugins against a plugin
// binary, from the plugin author's own go test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Plugin(t, "bin/fedhost-app-hello")
//		conformance.App(t, "bin/fedhost-app-hello",
//			conformance.AppCase{Name: "defaults"},
//			conformance.AppCase{Name: "custom", Config: json.RawMessage(`{"greeting":"Hi"}`)})
//	}
//
// The binary is started the way the host starts it (go-plugin, gRPC, AutoMTLS, protocol
// negotiation). Plugin runs the checks every kind shares, each a subtest, so a failure
// names what the host would refuse; Resource adds those of resource providers, Registrar
// those of registrar drivers (against a test server or sandbox of the registrar) and App
// those of apps (schema and defaults, requests, nodes, renames, operations and role
// groups, for each example configuration the author gives).
package conformance
