// Package conformance runs the standard checks of fedhost plugins against a plugin
// binary, from the plugin author's own go test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Plugin(t, "bin/fedhost-app-hello")
//	}
//
// The binary is started the way the host starts it (go-plugin, gRPC, AutoMTLS, protocol
// negotiation); each check is a subtest, so a failure names what the host would refuse.
package conformance
