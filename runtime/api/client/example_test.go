package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// An application starts a run of a registered flow on the local daemon and
// waits for its result. The request id makes the start safe to send
// again: if the answer is lost (a timeout, a restart of the daemon),
// sending the same start returns the same run instead of a second one.
func Example() {
	c := client.NewUnix("/run/weir/weir.sock")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	res, err := c.RunStart(ctx, apitypes.StartRequest{
		Flow:      "triage",
		Input:     json.RawMessage(`{"ticket": 4711}`),
		RequestID: "ticket-4711",
	})
	switch code := client.ErrorCode(err); {
	case err == nil:
	case code == apitypes.CodeQueueFull || code == apitypes.CodeDraining:
		log.Fatalf("the daemon is busy, try again later: %v", err)
	default:
		log.Fatal(err)
	}

	run, err := c.RunWait(ctx, res.RunID, client.RunWaitParams{Poll: 200 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if run.Phase != apitypes.PhaseCompleted {
		log.Fatalf("run %s ended %s: %s: %s", run.ID, run.Phase, run.Error.Code, run.Error.Message)
	}
	fmt.Printf("result: %s\n", run.Output)
}

// Over TCP the daemon knows the caller by a bearer token from its config.
func ExampleNew() {
	c, err := client.New("http://weir.internal:7070", client.WithToken("alice-token-0123456789"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	st, err := c.Health(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("admission %s, %d tasks queued, you are %s\n", st.Admission, st.Queued, st.Caller.Owner)
}

// Refusals carry the API's stable code; a missing run and another owner's
// run are the same answer.
func ExampleError() {
	c := client.NewUnix("/run/weir/weir.sock")
	defer c.Close()
	_, err := c.RunGet(context.Background(), "run_0123")
	var ae *client.Error
	switch {
	case errors.As(err, &ae) && ae.Code == apitypes.CodeNotFound:
		fmt.Println("no such run")
	case errors.Is(err, client.ErrNoDaemon):
		fmt.Println("start the daemon: weir serve")
	case err != nil:
		log.Fatal(err)
	}
}

// A flow file that does not pass the checks is refused with every problem
// found, and nothing is registered.
func ExampleClient_FlowRegister() {
	c := client.NewUnix("/run/weir/weir.sock")
	defer c.Close()
	res, err := c.FlowRegister(context.Background(), apitypes.SourceFile{Path: "triage.star", Src: `flow(name = "triage", nodes = [task("t", tool = "testkit.echo")])`})
	var de *client.DiagnosticsError
	if errors.As(err, &de) {
		for _, d := range de.Diagnostics {
			fmt.Printf("%s:%d:%d: %s: %s\n", d.File, d.Line, d.Col, d.Code, d.Message)
		}
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range res.Flows {
		fmt.Println("registered", f.Name, f.Hash[:12])
	}
}
