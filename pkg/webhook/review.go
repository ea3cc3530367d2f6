package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"
)

// Endpoint serves AdmissionReviews (v1 and v1beta1) for an
// admission.Handler, answering exactly as controller-runtime's
// admission.Webhook does (FuzzReviewDecodeLikeControllerRuntime holds it
// to that), but reading the review in one pass.
//
// admission.Webhook decodes a review with the API machinery's decoder:
// once to find its kind (encoding/json, which validates the whole body
// before decoding it) and once more into the AdmissionReview
// (sigs.k8s.io/json, likewise), four scans of the JSON before graceguard
// reads the Pod out of it in a fifth. Endpoint decodes the same
// maintained types (k8s.io/api/admission/v1) with encoding/json/v2 set to
// the legacy semantics of v1 (go-json-experiment/json/v1's options,
// case-sensitive names as the API machinery reads them), which validates
// as it decodes: one scan, and the objects left in the body, not copied.
type Endpoint struct {
	handler admission.Handler
	// log is the base logger of each review's logger; see reviewLogger.
	log logr.Logger
}

// maxRequestSize is controller-runtime's limit on a review's body (the API
// server's 3 MiB objects, twice for an UPDATE, and the rest).
const maxRequestSize = MaxReviewBytes

// reviewOptions read JSON as sigs.k8s.io/json's UnmarshalCaseSensitive does:
// encoding/json's semantics (a repeated name's last value kept, null a
// no-op but for pointers, maps and slices, merging into existing values,
// invalid UTF-8 replaced, type-provided UnmarshalJSON methods called as v1
// calls them), with names matched case-sensitively.
var reviewOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false))

// ServeHTTP reads a review, asks the handler, and writes its answer.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Body == nil || r.Body == http.NoBody {
		err := errors.New("request body is empty")
		e.baseLog().Error(err, "bad request")
		e.writeResponse(w, admission.Errored(http.StatusBadRequest, err), nil)
		return
	}
	defer r.Body.Close()
	body, err := readBody(r)
	if err != nil {
		e.baseLog().Error(err, "unable to read the body from the incoming request")
		code := int32(http.StatusBadRequest)
		if errors.Is(err, errTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		e.writeResponse(w, admission.Errored(code, err), nil)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		err := fmt.Errorf("contentType=%s, expected application/json", ct)
		e.baseLog().Error(err, "unable to process a request with unknown content type")
		e.writeResponse(w, admission.Errored(http.StatusBadRequest, err), nil)
		return
	}
	req := admission.Request{}
	gvk, err := decodeReview(body, &req.AdmissionRequest)
	if err != nil {
		// A syntax error names the path to it, as deep and as long as the
		// names in the body.
		err = boundedError(err)
		e.baseLog().Error(err, "unable to decode the request")
		e.writeResponse(w, admission.Errored(http.StatusBadRequest, err), nil)
		return
	}
	e.writeResponse(w, e.handle(ctx, req), gvk)
}

// maxErrorLength bounds the message of an error quoted in an answer or a
// log line.
const maxErrorLength = 1024

// boundedError is err with its message cut to maxErrorLength.
func boundedError(err error) error {
	if msg := err.Error(); len(msg) > maxErrorLength {
		return fmt.Errorf("%s... (%d bytes)", strings.ToValidUTF8(msg[:maxErrorLength-32], ""), len(msg))
	}
	return err
}

var errTooLarge = fmt.Errorf("request entity is too large; limit is %d bytes", maxRequestSize)

// readBody reads at most maxRequestSize bytes, into one buffer of the
// announced length when there is one (io.ReadAll would grow its buffer by
// doubling, allocating twice a big review's size).
func readBody(r *http.Request) ([]byte, error) {
	lr := &io.LimitedReader{R: r.Body, N: maxRequestSize}
	size := int64(512)
	if r.ContentLength > 0 && r.ContentLength < maxRequestSize {
		// One byte more, so that reaching the end needs no second buffer.
		size = r.ContentLength + 1
	}
	buf := make([]byte, 0, size)
	for {
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
	if lr.N <= 0 {
		return nil, errTooLarge
	}
	return buf, nil
}

// decodeReview decodes an AdmissionReview into req in one pass and returns
// its group, version and kind, as controller-runtime's decoding does: the
// request decoded like the API machinery decodes it, the kind read like
// its meta factory reads it, an apiVersion that does not parse refused.
func decodeReview(body []byte, req *admissionv1.AdmissionRequest) (*schema.GroupVersionKind, error) {
	if !utilyaml.IsJSONBuffer(body) {
		// Not a JSON object. controller-runtime's decoder then tries
		// protobuf and YAML (an empty body is YAML for null); the API
		// server sends neither, so the API machinery does it here too.
		return decodeReviewUniversally(body, req)
	}
	env := reviewEnvelope{request: req}
	// The objects are kept where they are in the body instead of copied
	// (RawExtension.UnmarshalJSON copies them): a 6.5 MB UPDATE costs its
	// body once, not twice. The same bytes, verbatim: ReadValue returns
	// the value as it is in the input.
	inBody := jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, re *runtime.RawExtension) error {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if string(v) == "null" {
			// As RawExtension.UnmarshalJSON: null leaves it as it was.
			return nil
		}
		end := dec.InputOffset()
		re.Raw = body[end-int64(len(v)) : end : end]
		return nil
	}), boundedEnvelope))
	if err := jsonv2.Unmarshal(body, &env, reviewOptions, inBody); err != nil {
		if se := (*jsonv1.SyntaxError)(nil); errors.As(err, &se) {
			// Worded as the API machinery words it, which finds it first.
			return nil, fmt.Errorf("couldn't get version/kind; json parse error: %w", err)
		}
		return nil, err
	}
	if env.odd {
		// A top-level name that only differs from apiVersion or kind in
		// case (the API server never sends one): the API machinery's meta
		// factory reads those case-insensitively, so let it say.
		return kjsonserializer.DefaultMetaFactory.Interpret(body)
	}
	gv, err := schema.ParseGroupVersion(env.apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: env.kind}, nil
}

// maxEnvelopeString bounds every string of a review's request that
// graceguard keeps (names, kinds, resources, the user, the uid, which the
// answer echoes): the API server sends names of at most 253 bytes, and a
// client that is not the API server gets an answer of bounded size and
// log lines of bounded length whatever it sends.
const maxEnvelopeString = 512

// maxGroupsKept bounds the user's groups kept (graceguard logs none; a
// review from a client that is not the API server may send millions).
const maxGroupsKept = 16

// boundedEnvelope reads the request's strings clipped (mutate.Clipped
// past maxEnvelopeString) and its user with at most maxGroupsKept groups
// and without extra, whose shape it still checks: what the request can make
// graceguard keep is bounded by construction, like what the reader keeps
// of its objects, and a request the API machinery refuses is refused.
// Where a value is not what it reads, each defers to the default decoding
// (errors.ErrUnsupported), so such requests fail as they would without it.
var boundedEnvelope = jsonv2.JoinUnmarshalers(
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, s *string) error {
		return clipInto(dec, func(c string) { *s = c })
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, u *types.UID) error {
		return clipInto(dec, func(c string) { *u = types.UID(c) })
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, o *admissionv1.Operation) error {
		return clipInto(dec, func(c string) { *o = admissionv1.Operation(c) })
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, u *authenticationv1.UserInfo) error {
		if dec.PeekKind() != '{' {
			return errors.ErrUnsupported
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadValue()
			if err != nil {
				return err
			}
			switch string(name) {
			case `"username"`:
				err = jsonv2.UnmarshalDecode(dec, &u.Username)
			case `"uid"`:
				err = jsonv2.UnmarshalDecode(dec, &u.UID)
			case `"groups"`:
				err = readGroups(dec, u)
			case `"extra"`:
				err = checkExtra(dec)
			default:
				err = dec.SkipValue()
			}
			if err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	}),
)

// clipInto calls set with the JSON string next in dec, clipped to
// maxEnvelopeString; anything but a string is left to the default decoding.
func clipInto(dec *jsontext.Decoder, set func(string)) error {
	if dec.PeekKind() != '"' {
		return errors.ErrUnsupported
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	set(readString(v, maxEnvelopeString))
	return nil
}

var errUserInfo = errors.New("cannot unmarshal the request's userInfo: want strings")

// readGroups keeps the first maxGroupsKept groups, clipped, and checks the
// rest are strings (null reads as "", as encoding/json reads it).
func readGroups(dec *jsontext.Decoder, u *authenticationv1.UserInfo) error {
	u.Groups = nil
	return stringList(dec, func(v jsontext.Value) {
		if len(u.Groups) >= maxGroupsKept {
			return
		}
		g := ""
		if v.Kind() == '"' {
			g = readString(v, maxEnvelopeString)
		}
		u.Groups = append(u.Groups, g)
	})
}

// checkExtra reads the user's extra without keeping it: an object of lists
// of strings, or null.
func checkExtra(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return errUserInfo
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		if _, err := dec.ReadValue(); err != nil {
			return err
		}
		if err := stringList(dec, func(jsontext.Value) {}); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// stringList reads a list of strings (or null), calling each with every element.
func stringList(dec *jsontext.Decoder, each func(jsontext.Value)) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '[':
	default:
		return errUserInfo
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if k := v.Kind(); k != '"' && k != 'n' {
			return errUserInfo
		}
		each(v)
	}
	_, err := dec.ReadToken()
	return err
}

// admissionCodecs are controller-runtime's: the API machinery's codecs for
// admission.k8s.io v1 and v1beta1.
var admissionCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	utilruntime.Must(admissionv1.AddToScheme(s))
	utilruntime.Must(admissionv1beta1.AddToScheme(s))
	return serializer.NewCodecFactory(s)
}()

// decodeReviewUniversally decodes a review exactly as controller-runtime
// does (admission.Webhook.ServeHTTP): into a type the scheme does not know,
// so that a v1beta1 review is read as v1.
func decodeReviewUniversally(body []byte, req *admissionv1.AdmissionRequest) (*schema.GroupVersionKind, error) {
	ar := unversionedReview{}
	ar.Request = req
	ar.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	_, gvk, err := admissionCodecs.UniversalDeserializer().Decode(body, nil, &ar)
	return gvk, err
}

// unversionedReview is controller-runtime's unversionedAdmissionReview.
type unversionedReview struct{ admissionv1.AdmissionReview }

func (r *unversionedReview) DeepCopyObject() runtime.Object {
	return &unversionedReview{AdmissionReview: *r.AdmissionReview.DeepCopy()}
}

// reviewEnvelope reads the top level of an AdmissionReview. It decodes
// every member the maintained AdmissionReview type has, case-sensitively
// and with encoding/json's semantics, so that what one of them holds fails
// the review exactly when it fails the API machinery's decoding: request
// into the caller's AdmissionRequest, response (which a review never
// carries) into a throwaway.
type reviewEnvelope struct {
	request          *admissionv1.AdmissionRequest
	response         *admissionv1.AdmissionResponse
	apiVersion, kind string
	odd              bool
}

func (e *reviewEnvelope) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		// null: nothing decoded, as encoding/json does with a struct.
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return fmt.Errorf("cannot unmarshal JSON %s into an AdmissionReview", dec.PeekKind())
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		var into any
		switch name := tok.String(); name {
		case "request":
			// Through the pointer, as encoding/json does: null sets it to
			// nil, and a request after that is decoded into a new one.
			into = &e.request
		case "response":
			into = &e.response
		case "apiVersion":
			into = &e.apiVersion
		case "kind":
			into = &e.kind
		default:
			// encoding/json matches names as bytes.EqualFold does.
			if strings.EqualFold(name, "apiVersion") || strings.EqualFold(name, "kind") {
				e.odd = true
			}
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if err := jsonv2.UnmarshalDecode(dec, into); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// handle runs the handler as admission.Webhook.Handle does: a recovered
// panic is a 500 answer (and counted in controller-runtime's
// controller_runtime_webhook_panics_total), the answer completed with the
// request's uid, its status code and its patch.
func (e *Endpoint) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			admissionmetrics.WebhookPanics.WithLabelValues().Inc()
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, r)
			}
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", r))
			resp.UID = req.UID
		}
	}()
	ctx = logf.IntoContext(ctx, logr.New(&lazySink{base: e.baseLog(), req: &req}))
	resp = e.handler.Handle(ctx, req)
	if err := resp.Complete(req); err != nil {
		logf.FromContext(ctx).Error(err, "unable to encode response")
		resp = admission.Errored(http.StatusInternalServerError, errors.New("unable to encode response"))
		resp.UID = req.UID
	}
	return resp
}

// writeResponse writes the answer as an AdmissionReview of the request's
// version (v1 when it named none), as admission.Webhook does.
func (e *Endpoint) writeResponse(w http.ResponseWriter, resp admission.Response, gvk *schema.GroupVersionKind) {
	ar := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	if gvk != nil {
		if *gvk == (schema.GroupVersionKind{}) {
			ar.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
		} else {
			ar.SetGroupVersionKind(*gvk)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(ar); err != nil {
		e.baseLog().Error(err, "unable to encode and write the response")
		serverError := admission.Errored(http.StatusInternalServerError, err)
		if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{Response: &serverError.AdmissionResponse}); err != nil {
			e.baseLog().Error(err, "still unable to encode and write the InternalServerError response")
		}
	}
}

func (e *Endpoint) baseLog() logr.Logger {
	if e.log.GetSink() == nil {
		return logf.Log.WithName("admission")
	}
	return e.log
}

// lazySink is a review's logger: the base logger with the review's object,
// resource, user and uid (admission.DefaultLogConstructor), built the first
// time something is logged. Most reviews log nothing, and building it was
// a few percent of a review.
type lazySink struct {
	base logr.Logger
	req  *admission.Request
	once sync.Once
	sink logr.LogSink
}

func (l *lazySink) get() logr.LogSink {
	// One frame more than the base: this sink's own method.
	l.once.Do(func() { l.sink = admission.DefaultLogConstructor(l.base.WithCallDepth(1), l.req).GetSink() })
	return l.sink
}

func (l *lazySink) Init(logr.RuntimeInfo) {}

func (l *lazySink) Enabled(level int) bool {
	s := l.base.GetSink()
	return s != nil && s.Enabled(level)
}

func (l *lazySink) Info(level int, msg string, kv ...any) {
	if s := l.get(); s != nil {
		s.Info(level, msg, kv...)
	}
}

func (l *lazySink) Error(err error, msg string, kv ...any) {
	if s := l.get(); s != nil {
		s.Error(err, msg, kv...)
	}
}

func (l *lazySink) WithValues(kv ...any) logr.LogSink {
	if s := l.get(); s != nil {
		return s.WithValues(kv...)
	}
	return l
}

func (l *lazySink) WithName(name string) logr.LogSink {
	if s := l.get(); s != nil {
		return s.WithName(name)
	}
	return l
}
