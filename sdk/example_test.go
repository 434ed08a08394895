package sdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/sdktest"
)

// memoPut is the tool of a vendor's plugin; its main would be
//
//	func main() { sdk.Serve(memoPut) }
var memoPut = sdk.Tool{
	Name:        "memo.put",
	Description: "Store a note under a key.",
	Idempotent:  true,
	InputSchema: `{"type":"object","required":["key","text"],"properties":{"key":{"type":"string"},"text":{"type":"string"}}}`,
	Run: func(ctx context.Context, call *sdk.Call) (any, error) {
		var in struct{ Key, Text string }
		if err := call.Decode(&in); err != nil {
			return nil, err
		}
		call.Progress(1, 1)
		return map[string]any{"stored": in.Key, "idempotency_key": call.IdempotencyKey}, nil
	},
}

// A tool is tested in-process with sdktest, the way weir would call it.
func Example() {
	res, err := sdktest.Call(context.Background(), memoPut, sdktest.Request{
		Input:          `{"key":"greeting","text":"hello"}`,
		IdempotencyKey: "call-1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Output), res.Progress)

	// Input that does not match the schema never reaches Run.
	_, err = sdktest.Call(context.Background(), memoPut, sdktest.Request{Input: `{"key":"greeting"}`})
	fmt.Println(err.(*sdktest.Error).Kind)
	// Output:
	// {"idempotency_key":"call-1","stored":"greeting"} [{1 1}]
	// schema
}

// NewTool declares a tool from a typed function: the input schema is derived
// from the input type (fields without omitempty are required), and input
// that does not match is refused before the function runs.
func ExampleNewTool() {
	type forecastIn struct {
		City string `json:"city"`
		Days int    `json:"days,omitempty"`
	}
	type forecastOut struct {
		City string   `json:"city"`
		Sky  []string `json:"sky"`
	}
	forecast := sdk.NewTool("weather.forecast",
		func(ctx context.Context, call *sdk.Call, in forecastIn) (forecastOut, error) {
			out := forecastOut{City: in.City}
			for range max(in.Days, 1) {
				out.Sky = append(out.Sky, "sun")
			}
			return out, nil
		},
		sdk.Description("Forecast the sky for the next days."),
		sdk.Idempotent(),
	)
	fmt.Println(forecast.InputSchema)

	res, _ := sdktest.Call(context.Background(), forecast, sdktest.Request{Input: `{"city":"Oslo","days":2}`})
	fmt.Println(string(res.Output))

	_, err := sdktest.Call(context.Background(), forecast, sdktest.Request{Input: `{"town":"Oslo"}`})
	fmt.Println(err.(*sdktest.Error).Kind)
	// Output:
	// {"additionalProperties":false,"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"type":"object"}
	// {"city":"Oslo","sky":["sun","sun"]}
	// schema
}

// Retryable marks a failure weir may retry (for an idempotent tool); a plain
// error is permanent.
func ExampleRetryable() {
	flaky := sdk.Tool{
		Name:       "weather.today",
		Idempotent: true,
		Run: func(ctx context.Context, call *sdk.Call) (any, error) {
			return nil, sdk.Retryable(fmt.Errorf("upstream answered 503"))
		},
	}
	_, err := sdktest.Call(context.Background(), flaky, sdktest.Request{})
	fmt.Println(err, err.(*sdktest.Error).Retryable())
	// Output: retryable: upstream answered 503 true
}

// RetryAfter and WithCode tell weir when a retry is worth it and give the
// failure a stable code that a flow can branch on.
func ExampleRetryAfter() {
	chat := sdk.Tool{
		Name:       "model.chat",
		Idempotent: true,
		Run: func(ctx context.Context, call *sdk.Call) (any, error) {
			err := fmt.Errorf("provider answered 429")
			return nil, sdk.RetryAfter(sdk.WithCode(err, "E_MODEL_RATE"), 20*time.Second)
		},
	}
	_, err := sdktest.Call(context.Background(), chat, sdktest.Request{})
	e := err.(*sdktest.Error)
	fmt.Println(e.Kind, e.Code, e.RetryAfter)
	// Output: retryable E_MODEL_RATE 20s
}

// A tool reports its actual cost by returning a Result.
func ExampleResult() {
	search := sdk.Tool{
		Name: "search.web",
		Cost: 10, // declared: budget units per call
		Run: func(ctx context.Context, call *sdk.Call) (any, error) {
			return sdk.Result{Output: []string{"a", "b"}, Cost: 3}, nil
		},
	}
	res, _ := sdktest.Call(context.Background(), search, sdktest.Request{})
	fmt.Println(string(res.Output), res.Cost, res.CostReported)
	// Output: ["a","b"] 3 true
}

// A tool whose output comes piece by piece shows each piece as it comes;
// what it returns stays the whole answer.
func ExampleCall_Partial() {
	echo := sdk.Tool{
		Name: "words.say",
		Run: func(ctx context.Context, call *sdk.Call) (any, error) {
			answer := ""
			for _, w := range []string{"Hello ", "from ", "a tool."} {
				call.Partial(w) // a no-op unless someone watches the call
				answer += w
			}
			return answer, nil
		},
	}
	res, err := sdktest.Call(context.Background(), echo, sdktest.Request{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q %s\n", res.Partials, res.Output)
	// Output: ["Hello " "from " "a tool."] "Hello from a tool."
}
