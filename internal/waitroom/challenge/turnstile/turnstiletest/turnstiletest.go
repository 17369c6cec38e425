// Package turnstiletest is a local stand-in for Cloudflare's siteverify endpoint, for tests: the
// real one is not reachable from the test machines, and Cloudflare documents how it answers its
// test secret keys, which is all the stand-in does. Imported only by tests.
package turnstiletest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Cloudflare's documented test secret keys, and the token its test site keys' widgets give.
const (
	// SecretPass always passes validation.
	SecretPass = "1x0000000000000000000000000000000AA"
	// SecretFail always fails validation (invalid-input-response).
	SecretFail = "2x0000000000000000000000000000000AA"
	// SecretSpent answers that the token was already spent (timeout-or-duplicate).
	SecretSpent = "3x0000000000000000000000000000000AA"
	// DummyToken is what the test site keys' widgets produce.
	DummyToken = "XXXX.DUMMY.TOKEN.XXXX"
)

// Request is one siteverify call the stand-in received.
type Request struct {
	Secret, Response, RemoteIP string
}

// Server is the stand-in: URL is its siteverify endpoint.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	requests []Request
}

// New starts a stand-in; close it when done. It answers as siteverify does for the test secret
// keys: SecretPass a success with hostname example.com, SecretFail invalid-input-response,
// SecretSpent timeout-or-duplicate; any other secret invalid-input-secret (a production key
// sent to the stand-in), no token missing-input-response.
func New() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.siteverify))
	return s
}

// Requests returns the calls received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

type answer struct {
	Success     bool     `json:"success"`
	ErrorCodes  []string `json:"error-codes"`
	ChallengeTS string   `json:"challenge_ts,omitempty"`
	Hostname    string   `json:"hostname,omitempty"`
	Action      string   `json:"action,omitempty"`
	CData       string   `json:"cdata,omitempty"`
}

func (s *Server) siteverify(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_ = json.NewEncoder(w).Encode(answer{ErrorCodes: []string{"bad-request"}})
		return
	}
	req := Request{Secret: r.PostForm.Get("secret"), Response: r.PostForm.Get("response"), RemoteIP: r.PostForm.Get("remoteip")}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	a := answer{ErrorCodes: []string{}}
	switch {
	case req.Secret == "":
		a.ErrorCodes = []string{"missing-input-secret"}
	case req.Response == "":
		a.ErrorCodes = []string{"missing-input-response"}
	case req.Secret == SecretPass:
		a = answer{Success: true, ErrorCodes: []string{}, ChallengeTS: time.Now().UTC().Format(time.RFC3339Nano), Hostname: "example.com"}
	case req.Secret == SecretFail:
		a.ErrorCodes = []string{"invalid-input-response"}
	case req.Secret == SecretSpent:
		a.ErrorCodes = []string{"timeout-or-duplicate"}
	default:
		a.ErrorCodes = []string{"invalid-input-secret"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}
