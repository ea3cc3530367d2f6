package mutate

import (
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// Operation is one JSON patch (RFC 6902) operation, the type
// controller-runtime's admission responses carry.
type Operation = jsonpatch.Operation

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escape encodes a JSON pointer reference token (RFC 6901).
func escape(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token
	}
	return pointerEscaper.Replace(token)
}

// add makes an "add" operation. On an object member "add" sets the member
// whether or not it exists, so it never needs a preceding test or remove.
func add(pointer string, value any) Operation {
	return Operation{Operation: "add", Path: pointer, Value: value}
}
