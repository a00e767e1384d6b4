// Command petstore-api is the small pet store the README's REST example
// calls: the API examples/petstore.yaml describes, in memory, on
// 127.0.0.1:9000 unless -listen says otherwise. Requests need the header
// X-Api-Key with the -key value (default demo-key, the default
// examples/rest.yaml sends), so that the example shows credentials
// reaching a backend. Standard library only; it is a demonstration, not
// part of toolgate.
//
//	go run ./examples/petstore-api [-listen 127.0.0.1:9000] [-key demo-key]
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// pet is a pet as the API stores and returns it.
type pet struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Species string   `json:"species"`
	Tags    []string `json:"tags,omitempty"`
}

// store is the pets, in the order they were added.
type store struct {
	mu   sync.Mutex
	pets []pet // guarded by mu
	next int   // guarded by mu: the last ID given
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to listen on")
	key := flag.String("key", "demo-key", "the X-Api-Key value requests must send")
	flag.Parse()
	s := &store{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/pets", s.list)
	mux.HandleFunc("POST /v1/pets", s.add)
	mux.HandleFunc("GET /v1/pets/{petId}", s.get)
	mux.HandleFunc("DELETE /v1/pets/{petId}", s.remove)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The address listened on, port 0 resolved: a test starts it so.
	log.Printf("pet store listening on http://%s/v1 (X-Api-Key: %s)", ln.Addr(), *key)
	log.Fatal(http.Serve(ln, requireKey(*key, mux)))
}

// requireKey refuses requests without the API key with 401.
func requireKey(key string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			http.Error(w, `{"error":"send the header X-Api-Key: `+key+`"}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *store) list(w http.ResponseWriter, r *http.Request) {
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit < 1 {
		limit = 100
	}
	species := r.URL.Query().Get("species")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []pet{}
	for _, p := range s.pets {
		if len(out) < limit && (species == "" || p.Species == species) {
			out = append(out, p)
		}
	}
	reply(w, http.StatusOK, out)
}

func (s *store) add(w http.ResponseWriter, r *http.Request) {
	var p pet
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&p); err != nil || p.Name == "" || p.Species == "" {
		reply(w, http.StatusBadRequest, map[string]string{"error": "want a JSON body with name and species"})
		return
	}
	s.mu.Lock()
	s.next++
	p.ID = strconv.Itoa(s.next)
	s.pets = append(s.pets, p)
	s.mu.Unlock()
	reply(w, http.StatusCreated, p)
}

func (s *store) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.pets, func(p pet) bool { return p.ID == r.PathValue("petId") })
	if i < 0 {
		reply(w, http.StatusNotFound, map[string]string{"error": "no pet " + r.PathValue("petId")})
		return
	}
	reply(w, http.StatusOK, s.pets[i])
}

func (s *store) remove(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pets = slices.DeleteFunc(s.pets, func(p pet) bool { return p.ID == r.PathValue("petId") })
	w.WriteHeader(http.StatusNoContent)
}
