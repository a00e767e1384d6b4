package rest

import "io"

// ReadCapped reads r to its end or to limit bytes (at least 0), whichever
// comes first, never allocating more than limit bytes. hint is the size r is expected
// to hold, or -1 when it is not known: a right hint reads in one
// allocation. It returns what it read, and the read's error unless it is
// io.EOF. It does not say whether r held more than limit: a caller that
// must know reads one byte more (passes limit+1) and compares. The REST
// executor reads response bodies with it, and the gateway OpenAPI
// documents.
func ReadCapped(r io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(4 << 10)
	if hint >= 0 {
		size = hint + 1 // one more, to see the end without growing
	}
	buf := make([]byte, 0, min(size, limit))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			b := make([]byte, len(buf), min(max(2*int64(cap(buf)), 512), limit))
			copy(b, buf)
			buf = b
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}
