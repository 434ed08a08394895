package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/dedupe"
)

// maxBlobBytes bounds one image, audio clip or embedded binary resource
// the bridge keeps.
const maxBlobBytes = 16 << 20

// blobDir is where binary content is kept, under the plugin's state
// directory: blobs/SHA256.
const blobDir = "blobs"

// ref is what a flow sees of binary or linked content: a reference with
// its MIME type, never the bytes themselves (they may be large, and a
// flow's values are journaled).
type ref struct {
	Type     string `json:"type"` // image, audio, resource, resource_link
	MIMEType string `json:"mime_type,omitempty"`
	// URI is the resource's URI, or file://PATH of a kept blob.
	URI  string `json:"uri,omitempty"`
	Name string `json:"name,omitempty"`
	// SHA256 and Size describe a kept blob.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// Text is an embedded text resource's content.
	Text string `json:"text,omitempty"`
	// Annotations are the block's annotations as the server gave them
	// (audience, priority, lastModified), kept so a flow or a model can
	// tell content meant for the user from content meant for it.
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

// part is one element of a mixed result: text as {"type":"text","text":...}
// or a ref.
type part struct {
	Type        string           `json:"type"`
	Text        string           `json:"text"`
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

// mapResult turns an MCP tool result into weir's output:
//   - isError: true → a completed, permanent tool error (CodeToolError)
//     whose message is the result's text;
//   - structuredContent → that JSON value, binary content in it (image or
//     audio blocks, binary resource contents) kept as blobs and replaced
//     by their references;
//   - text only → one string (several texts joined by newlines);
//   - anything else → a list, text as {"type":"text","text":...} and
//     images, audio and resources as references with their MIME type.
func mapResult(res *mcp.CallToolResult, stateDir string) (any, error) {
	if res.IsError {
		msg := strings.TrimSpace(texts(res.Content))
		if len(msg) > maxErrorText {
			msg = msg[:maxErrorText] + "…"
		}
		if msg == "" {
			msg = "the MCP tool reported an error"
		}
		return nil, &sdk.Error{Kind: sdk.KindPermanent, Code: CodeToolError, Message: msg}
	}
	if res.StructuredContent != nil {
		// A server may carry binary content here too (server-filesystem's
		// read_media_file does): it goes to the blob store as it would
		// from a content block, never into the flow's values.
		return keepStructuredBlobs(res.StructuredContent, stateDir, 0)
	}
	// Plain text without annotations is one string; anything else a list
	// of parts, so that no annotation is lost.
	allText := true
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); !ok || tc.Annotations != nil {
			allText = false
		}
	}
	if allText {
		return texts(res.Content), nil
	}
	out := make([]any, 0, len(res.Content))
	// blob keeps binary content and adds its ref, with the block's name
	// and annotations, to out.
	blob := func(kind, mime string, data []byte, name string, ann *mcp.Annotations) error {
		r, err := keepBlob(stateDir, kind, mime, data)
		if err != nil {
			return err
		}
		r.Name, r.Annotations = name, ann
		out = append(out, r)
		return nil
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, part{Type: "text", Text: c.Text, Annotations: c.Annotations})
		case *mcp.ImageContent:
			if err := blob("image", c.MIMEType, c.Data, "", c.Annotations); err != nil {
				return nil, err
			}
		case *mcp.AudioContent:
			if err := blob("audio", c.MIMEType, c.Data, "", c.Annotations); err != nil {
				return nil, err
			}
		case *mcp.ResourceLink:
			out = append(out, ref{Type: "resource_link", MIMEType: c.MIMEType, URI: c.URI, Name: c.Name, Annotations: c.Annotations})
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			if c.Resource.Blob != nil {
				if err := blob("resource", c.Resource.MIMEType, c.Resource.Blob, c.Resource.URI, c.Annotations); err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, ref{Type: "resource", MIMEType: c.Resource.MIMEType, URI: c.Resource.URI, Text: c.Resource.Text, Annotations: c.Annotations})
		default:
			return nil, sdk.WithCode(fmt.Errorf("the MCP server answered content of a kind weir does not take (%T)", c), CodeBadResult)
		}
	}
	return out, nil
}

// maxStructuredDepth bounds how deep keepStructuredBlobs looks for binary
// content; deeper values pass as they are (the host's message limit
// bounds them).
const maxStructuredDepth = 32

// keepStructuredBlobs replaces, in a structuredContent value, each object
// shaped like an MCP image or audio block ({"type":"image"|"audio",
// "data":BASE64,"mimeType"}) or like binary resource contents ({"uri",
// "blob":BASE64,"mimeType"}) by its blob's reference, as mapResult does
// for content blocks.
func keepStructuredBlobs(v any, stateDir string, depth int) (any, error) {
	if depth > maxStructuredDepth {
		return v, nil
	}
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			r, err := keepStructuredBlobs(e, stateDir, depth+1)
			if err != nil {
				return nil, err
			}
			v[i] = r
		}
		return v, nil
	case map[string]any:
		mime, _ := v["mimeType"].(string)
		kind, _ := v["type"].(string)
		if data, ok := v["data"].(string); ok && (kind == "image" || kind == "audio") {
			return structuredBlob(stateDir, kind, mime, "", data)
		}
		if blob, ok := v["blob"].(string); ok {
			uri, _ := v["uri"].(string)
			return structuredBlob(stateDir, "resource", mime, uri, blob)
		}
		for k, e := range v {
			r, err := keepStructuredBlobs(e, stateDir, depth+1)
			if err != nil {
				return nil, err
			}
			v[k] = r
		}
		return v, nil
	}
	return v, nil
}

func structuredBlob(stateDir, kind, mime, name, b64 string) (any, error) {
	if base64.StdEncoding.DecodedLen(len(b64)) > maxBlobBytes+3 {
		return nil, sdk.WithCode(fmt.Errorf("the MCP server answered %s content of about %d bytes, at most %d", kind, base64.StdEncoding.DecodedLen(len(b64)), maxBlobBytes), CodeBadResult)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, sdk.WithCode(fmt.Errorf("the MCP server answered %s content whose data is not base64: %v", kind, err), CodeBadResult)
	}
	r, err := keepBlob(stateDir, kind, mime, data)
	if err != nil {
		return nil, err
	}
	r.Name = name
	return r, nil
}

func texts(cs []mcp.Content) string {
	var ss []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			ss = append(ss, t.Text)
		}
	}
	return strings.Join(ss, "\n")
}

// keepBlob stores data under the state directory by its SHA-256 (the same
// bytes are kept once) and returns its reference.
func keepBlob(stateDir, kind, mime string, data []byte) (ref, error) {
	if len(data) > maxBlobBytes {
		return ref{}, sdk.WithCode(fmt.Errorf("the MCP server answered %s content of %d bytes, at most %d", kind, len(data), maxBlobBytes), CodeBadResult)
	}
	sum := sha256.Sum256(data)
	r := ref{Type: kind, MIMEType: mime, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	if stateDir == "" {
		return r, nil
	}
	dir := filepath.Join(stateDir, blobDir)
	path := filepath.Join(dir, r.SHA256)
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return ref{}, err
		}
		if err := dedupe.WriteFileAtomic(path, data, 0o600); err != nil {
			return ref{}, err
		}
	}
	r.URI = "file://" + path
	return r, nil
}
