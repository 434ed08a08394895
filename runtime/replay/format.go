package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// The recording format (docs/flows.md, "Testing flows with recordings").
const (
	// Format names the kind of file in its "format" field.
	Format = "weirrun"
	// FormatVersion is the version of the body this package writes and
	// the only one it reads: a body's meaning never changes under a
	// version, and a reader refuses a version it does not know.
	FormatVersion = 1
	// MaxBytes bounds a recording file, whole.
	MaxBytes = 64 << 20
)

// maxBytes is the bound Write, Read and Record apply: MaxBytes, which a
// test lowers so as not to build 64 MiB to see it refused.
var maxBytes = MaxBytes

// Codes of the refusals a recording meets, stable for scripts and CI.
const (
	// CodeTooLarge: the recording would be, or is, larger than MaxBytes.
	CodeTooLarge = "E_TOO_LARGE"
	// CodeFormat: the file is no recording, or one of another format
	// version.
	CodeFormat = "E_RECORDING_FORMAT"
	// CodeChecksum: the body does not hash to the checksum the file
	// carries: it was edited or damaged after it was written.
	CodeChecksum = "E_RECORDING_CHECKSUM"
	// CodeNotSettled: the run is still moving (queued, running): its
	// recording would stop at a point the run is already past.
	CodeNotSettled = "E_RUN_NOT_SETTLED"
)

// Error is a refused recording: a stable code and what was wrong.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// file is a recording as it is written: the header, then the body the
// checksum covers.
type file struct {
	Format        string          `json:"format"`
	FormatVersion int             `json:"format_version"`
	SHA256        string          `json:"sha256"`
	Body          json.RawMessage `json:"body"`
}

// Recording is one run, self-contained: what it ran and everything it
// was answered.
type Recording struct {
	// RecordedAt is when the recording was made.
	RecordedAt time.Time `json:"recorded_at"`
	// Run is the run as it stood then.
	Run Run `json:"run"`
	// Sources are the files of the flow version the run ran, registered
	// together.
	Sources []apitypes.SourceFile `json:"sources"`
	// Tools declare the tools the version calls (their manifests' effect,
	// cost, schemas, models), so the version registers with no plugin.
	Tools []apitypes.ToolDecl `json:"tools"`
	// Steps are the ends of the run's node visits, in the order they
	// ended: its path.
	Steps []Step `json:"steps"`
	// Calls are the tries of the run's tool calls, with their answers.
	Calls []Call `json:"calls"`
	// Turns are its agents' model turns, each as the store journaled it
	// (request digest, the model's answer, the ends of the calls asked).
	Turns []json.RawMessage `json:"turns,omitempty"`
	// Decisions are what people decided on the run's waits, in order.
	Decisions []Decision `json:"decisions,omitempty"`
	// Redacted are the JSON pointers whose values were blanked in the
	// input, the output, every call's arguments and answer and every
	// decision's payload; a replay blanks its own arguments there too
	// before comparing them.
	Redacted []string `json:"redacted,omitempty"`
}

// Run is what a recording keeps of the run itself.
type Run struct {
	ID        string             `json:"id"`
	Flow      string             `json:"flow"`
	Version   string             `json:"version"` // the flow version's content hash
	Phase     string             `json:"phase"`
	Input     json.RawMessage    `json:"input,omitempty"`
	Output    json.RawMessage    `json:"output,omitempty"`
	Error     *apitypes.RunError `json:"error,omitempty"`
	Budget    int64              `json:"budget,omitempty"`
	Spent     int64              `json:"spent,omitempty"`
	CreatedAt string             `json:"created_at"`
	UpdatedAt string             `json:"updated_at"`
}

// Step is the end of one visit of a node.
type Step struct {
	Seq   uint64    `json:"seq"`
	At    time.Time `json:"at"`
	Node  string    `json:"node"`
	Visit int       `json:"visit"`
	// Completed is false for a visit that failed (and took its error
	// wire, or ended the run).
	Completed bool `json:"completed"`
	// Wire is the node the visit's end went to, when the timeline says
	// (a branch's, a failure's).
	Wire    string `json:"wire,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Call is one try of one tool call and its answer: an output, or an
// error.
type Call struct {
	Node  string `json:"node"`
	Visit int    `json:"visit"`
	// Index places the call inside its node (an agent's turn and call);
	// empty for a task's.
	Index []int `json:"index,omitempty"`
	// Try numbers the tries of the one logical call, from 1.
	Try  int    `json:"try"`
	Tool string `json:"tool"`
	// Args are the call's arguments; ArgsSHA256 their digest where only
	// it was journaled (a model turn's request).
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsSHA256 string          `json:"args_sha256,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *CallError      `json:"error,omitempty"`
	Cost       int64           `json:"cost,omitempty"`
	At         time.Time       `json:"at"`
}

// CallError is how a try failed, as the run was told.
type CallError struct {
	// Kind is the failure's kind (tool.Kind: retryable, permanent, ...).
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// Decision is what a person decided on one of the run's waits.
type Decision struct {
	Node string `json:"node"`
	// Wait is the wait's id (NODE@VISIT[.INDEX...]), the same in a
	// replay: a decision is made again on the wait of that id.
	Wait string `json:"wait"`
	Kind string `json:"kind"`
	// Approved, with the payload a wait node's approval carried (or an
	// agent's proposed call's edited arguments), or rejected with a
	// reason.
	Approved bool            `json:"approved"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	// Respond: a person answered an agent's proposed call in the tool's
	// place, with Result.
	Respond bool            `json:"respond,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	At      time.Time       `json:"at"`
}

// Write writes rec as a recording file: the header with the format, its
// version and the body's checksum, then the body. A recording over
// MaxBytes is refused (E_TOO_LARGE) and nothing is written.
func Write(w io.Writer, rec *Recording) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	sum, err := checksum(body)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(file{Format: Format, FormatVersion: FormatVersion, SHA256: sum, Body: body}, "", " ")
	if err != nil {
		return err
	}
	out = append(out, '\n')
	if len(out) > maxBytes {
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf("the recording of run %s is %d bytes, more than the limit of %d: redact large fields with --redact", rec.Run.ID, len(out), maxBytes)}
	}
	_, err = w.Write(out)
	return err
}

// ReadFile reads the recording at path (Read); refusals name the file.
func ReadFile(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rec, err := Read(f)
	var re *Error
	if errors.As(err, &re) {
		return nil, &Error{Code: re.Code, Message: path + ": " + re.Message}
	}
	return rec, err
}

// Read reads a recording, refusing one over MaxBytes (E_TOO_LARGE), one
// that is not a recording or is of another format version
// (E_RECORDING_FORMAT, naming both versions), and one whose body does not
// hash to its checksum (E_RECORDING_CHECKSUM).
func Read(r io.Reader) (*Recording, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(maxBytes)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBytes {
		return nil, &Error{Code: CodeTooLarge, Message: fmt.Sprintf("more than %d bytes: no recording is that large", maxBytes)}
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, &Error{Code: CodeFormat, Message: "not a recording (" + Format + " JSON): " + err.Error()}
	}
	if f.Format != Format {
		return nil, &Error{Code: CodeFormat, Message: fmt.Sprintf("not a recording: its format is %q, not %q", f.Format, Format)}
	}
	if f.FormatVersion != FormatVersion {
		return nil, &Error{Code: CodeFormat, Message: fmt.Sprintf("a recording of format version %d; this weir reads format version %d only", f.FormatVersion, FormatVersion)}
	}
	sum, err := checksum(f.Body)
	if err != nil {
		return nil, &Error{Code: CodeFormat, Message: "its body is not JSON: " + err.Error()}
	}
	if sum != f.SHA256 {
		return nil, &Error{Code: CodeChecksum, Message: fmt.Sprintf("its body hashes to sha256 %s, not to the %s it carries: it was edited or damaged after it was written; record the run again", short(sum), short(f.SHA256))}
	}
	var rec Recording
	dec := json.NewDecoder(bytes.NewReader(f.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, &Error{Code: CodeFormat, Message: "its body does not fit format version 1: " + err.Error()}
	}
	return &rec, nil
}

// checksum is the SHA-256 (hex) of body's canonical form: the same JSON
// value with no insignificant space, object keys sorted and strings
// escaped one way, so that reformatting a file keeps it valid and any
// change to a value does not.
func checksum(body []byte) (string, error) {
	c, err := canonical(body)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(c)
	return hex.EncodeToString(h[:]), nil
}

// canonical is the canonical form of a JSON value (checksum). Numbers
// keep their text, so no precision is lost on the way.
func canonical(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// canonicalEqual says whether two JSON values are the same value (an
// empty one is {}).
func canonicalEqual(a, b json.RawMessage) bool {
	ca, errA := canonical(orEmpty(a))
	cb, errB := canonical(orEmpty(b))
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
