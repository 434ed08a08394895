// Command github-delivery sends one webhook delivery to a weir hook as
// GitHub sends it: the JSON body, the X-GitHub-Event and
// X-GitHub-Delivery headers, and X-Hub-Signature-256, the HMAC-SHA256 of
// the body under the hook's secret. `make demo` uses it to stand in for
// GitHub offline; it is also a way to try a hook block before pointing
// GitHub at it.
//
//	github-delivery -hook github -secret-file github.secret -event issues -id d-1 '{"action":"opened",...}'
//
// It posts over the daemon's socket (-socket, default $WEIR_SOCKET) or
// to -url, prints the daemon's answer, and exits 1 unless it is a 2xx.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	hook := flag.String("hook", "github", "the hook's name: the delivery goes to /v1/hooks/NAME")
	secretFile := flag.String("secret-file", "", "the file holding the hook's secret (required)")
	event := flag.String("event", "", "the X-GitHub-Event header (required)")
	id := flag.String("id", "", "the X-GitHub-Delivery header, the delivery's id (required)")
	socket := flag.String("socket", os.Getenv("WEIR_SOCKET"), "the daemon's socket")
	url := flag.String("url", "", "the daemon's base URL instead of its socket (https://host:port)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: github-delivery -secret-file FILE -event EVENT -id ID [flags] BODY")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *secretFile == "" || *event == "" || *id == "" || (*socket == "" && *url == "") {
		flag.Usage()
		os.Exit(2)
	}
	if err := deliver(*hook, *secretFile, *event, *id, *socket, *url, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "github-delivery:", err)
		os.Exit(1)
	}
}

func deliver(hook, secretFile, event, id, socket, base, body string) error {
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		return err
	}
	// As the daemon reads it: one trailing newline is not the secret's.
	mac := hmac.New(sha256.New, bytes.TrimSuffix(secret, []byte("\n")))
	mac.Write([]byte(body))
	client := &http.Client{Timeout: 30 * time.Second}
	if base == "" {
		base = "http://weir"
		client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/hooks/"+hook, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Printf("%s %s\n", resp.Status, bytes.TrimSpace(answer))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the hook refused the delivery (%s)", resp.Status)
	}
	return nil
}
