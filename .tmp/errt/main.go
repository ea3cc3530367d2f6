package main

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

func main() {
	opts := jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false))
	for _, in := range []string{`{"request": {`, `{"request": {"uid": 5}}`, `{"request": {"uid": "a"}} x`} {
		var r struct{ Request *admissionv1.AdmissionRequest `json:"request"` }
		err := jsonv2.Unmarshal([]byte(in), &r, opts)
		fmt.Printf("%T %v\n", err, err)
	}
}
