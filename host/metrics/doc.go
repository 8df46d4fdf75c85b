// Package metrics is the host's Prometheus metrics: a registry of its own (with the Go
// and process collectors), counters and histograms the queue, the plugin manager and the
// HTTP server feed, and gauges read from the store at each scrape. Labels take only
// bounded values: operations, states, plugin and method names, route patterns, status
// codes, deployment ids and app names, never a secret, a raw path or an operator's domain.
package metrics
