package chat_test

import (
	"fmt"

	"github.com/weirhq/weir/sdk/chat"
)

// A chat tool shows weir's tool names to a provider in the provider's
// alphabet and maps the names of the calls the model makes back.
func ExampleProviderToolName() {
	name, err := chat.ProviderToolName("notes.put")
	fmt.Println(name, err)
	fmt.Println(chat.UnmapToolName(name))
	_, err = chat.ProviderToolName("notes.put__all")
	fmt.Println(err != nil)
	// Output:
	// notes__put <nil>
	// notes.put
	// true
}

// Registration refuses an agent's tool list that a provider could not
// tell apart.
func ExampleCheckToolNames() {
	fmt.Println(chat.CheckToolNames([]string{"web.search", "notes.put"}))
	fmt.Println(chat.CheckToolNames([]string{"web.search", "web.search"}))
	// Output:
	// <nil>
	// tool names: tool "web.search" is listed twice
}
