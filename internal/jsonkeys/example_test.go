package jsonkeys_test

import (
	"fmt"

	"github.com/brainrt/brain/internal/jsonkeys"
)

func ExampleDuplicate() {
	fmt.Println(jsonkeys.Duplicate([]byte(`{"path":"notes.txt","path":"secret.txt"}`), false))
	fmt.Println(jsonkeys.Duplicate([]byte(`{"mode":"read","MODE":"write"}`), false))
	fmt.Println(jsonkeys.Duplicate([]byte(`{"mode":"read","MODE":"write"}`), true)) // as encoding/json matches keys
	// Output:
	// path path true
	//   false
	// mode MODE true
}
