package client

import (
	"testing"
)

// The real-server tests of this package are in runtime/api
// (client_test.go), beside the server they exercise: they share its test
// bundle of a real engine, store and plugin. Here: what needs no server.

// An answer that is not the API's JSON still becomes an *Error, with the
// status and what came.
func TestErrorOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		status        int
		body          string
		code, message string
		class         string
	}{
		{"api error", 404, `{"code":"E_NOT_FOUND","message":"no run r","class":"protocol"}`, "E_NOT_FOUND", "no run r", "protocol"},
		{"proxy page", 502, "<html>bad gateway</html>\n", CodeHTTP, "502 Bad Gateway: <html>bad gateway</html>", ""},
		{"json without a code", 422, `{"flows":null}`, CodeHTTP, `422 Unprocessable Entity: {"flows":null}`, ""},
		{"empty", 500, "", CodeHTTP, "500 Internal Server Error: ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := errorOf(tt.status, []byte(tt.body))
			if e.Code != tt.code || e.Message != tt.message || e.Class != tt.class || e.HTTPStatus != tt.status {
				t.Errorf("got %+v", e)
			}
			if e.Error() != tt.code+": "+tt.message {
				t.Errorf("Error() = %q", e.Error())
			}
		})
	}
}
