// Package registrar is the contract of registrar drivers: plugins that register, renew,
// transfer and lock domains at one registrar's API.
//
// A driver implements [Registrar] and, where the registrar allows, the optional
// [Transferer], [Locker], [DNSSECRemover] and [ContactManager]. Calls a driver does not
// offer reach the host as sdk.CodeUnsupported.
package registrar
