// Command httpserver is the node the local provider's tests run: it listens on
// LISTEN_ADDR, answers /healthz, keeps /data in the file DATA_DIR/data (GET and PUT, with
// the bearer token read from TOKEN_FILE), lists its environment's names at /env, writes
// bytes to stdout at /log?bytes=N, and gives its pid at /pid and
// its working dir at /wd. With FAIL_START set it
// prints the token to stderr and exits 1, for the tests of secret scrubbing. It exits by
// itself when its working dir is removed, so a test cannot leak it.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	token, err := os.ReadFile(os.Getenv("TOKEN_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading TOKEN_FILE:", err)
		os.Exit(1)
	}
	token = bytes.TrimSpace(token)
	if os.Getenv("FAIL_START") != "" {
		fmt.Fprintf(os.Stderr, "refusing to start with token %s\n", token)
		os.Exit(1)
	}
	wd, _ := os.Getwd()
	go func() {
		for {
			time.Sleep(time.Second)
			if _, err := os.Stat(wd); err != nil {
				os.Exit(0)
			}
		}
	}()
	data := filepath.Join(os.Getenv("DATA_DIR"), "data")
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/wd", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, wd) })
	mux.HandleFunc("/pid", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, os.Getpid()) })
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		var names []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprint(w, strings.Join(names, "\n"))
	})
	mux.HandleFunc("/log", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		os.Stdout.Write(bytes.Repeat([]byte("x"), n))
	})
	mux.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+string(token) {
			http.Error(w, "wrong token", http.StatusUnauthorized)
			return
		}
		switch r.Method {
		case http.MethodGet:
			b, err := os.ReadFile(data)
			if err != nil {
				http.Error(w, "no data", http.StatusNotFound)
				return
			}
			w.Write(b)
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			if err := os.WriteFile(data, b, 0o600); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		default:
			http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
		}
	})
	fmt.Println("listening on", os.Getenv("LISTEN_ADDR"))
	if err := http.ListenAndServe(os.Getenv("LISTEN_ADDR"), mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
