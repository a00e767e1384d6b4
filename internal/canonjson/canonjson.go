// Package canonjson writes a JSON value in one canonical form, so that two
// encodings of the same value compare equal, and hashes a call's
// arguments in that form ([ArgsSum]): the loop guard of the gateway and of
// the agent loop tells repeated arguments apart by it. It imports nothing
// beyond the standard library.
package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
)

// JSON returns the canonical form of the JSON value data: object
// keys sorted (duplicates: the last wins), no whitespace, strings escaped
// one way, and each number written by its value, so that 1, 1.0, 1e0 and
// 10e-1 are the same and big integers stay exact (-0 is 0). Invalid UTF-8
// in strings reads as U+FFFD, as encoding/json has it.
func JSON(data []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, fmt.Errorf("canonical JSON: data after the value")
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		n, err := Number(string(x))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case string:
		writeString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// Number writes the JSON number s by its value, exactly: 0 for
// zero (either sign), else [-]D when the value is the integer D with no
// trailing zeros, else [-]DeE with D an integer with no leading or
// trailing zeros and E ≠ 0. 1e400 stays 1e400, however large E.
func Number(s string) (string, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	e := new(big.Int)
	if hasExp {
		if _, ok := e.SetString(strings.TrimPrefix(exp, "+"), 10); !ok {
			return "", fmt.Errorf("canonical JSON: bad number %q", s)
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	e.Sub(e, big.NewInt(int64(len(frac))))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	if strings.Trim(digits, "0123456789") != "" {
		return "", fmt.Errorf("canonical JSON: bad number %q", s)
	}
	trimmed := strings.TrimRight(digits, "0")
	e.Add(e, big.NewInt(int64(len(digits)-len(trimmed))))
	var out strings.Builder
	if neg {
		out.WriteByte('-')
	}
	out.WriteString(trimmed)
	if e.Sign() != 0 {
		out.WriteByte('e')
		out.WriteString(e.String())
	}
	return out.String(), nil
}
