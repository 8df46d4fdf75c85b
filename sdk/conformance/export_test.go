package conformance

// CheckExec lets the kit's own tests run the exec checks on a recorder.
var CheckExec = checkExec
