// Package catalog is what the host offers operators: the app plugins it has loaded, each
// with its version, summary, icon, options schema and renames log, and the deployment
// schema composed from them (domain, and per app enable, deleteData and its options).
package catalog
