package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
)

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// bodyBytes is interop/scenarios.py's body_bytes: the label, or with a size the label, '#' and a
// filler ("repeat": the alphabet over and over; otherwise xorshift32-picked letters).
func bodyBytes(s Spec) []byte {
	label := []byte(s.Body)
	if s.Size == 0 {
		return label
	}
	n := s.Size - len(label) - 1
	out := make([]byte, 0, s.Size)
	out = append(append(out, label...), '#')
	if s.Fill == "repeat" {
		for i := 0; i < n; i++ {
			out = append(out, alphabet[i%64])
		}
		return out
	}
	x := uint32(2463534242)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out = append(out, alphabet[x%64])
	}
	return out
}

// bodyFields are the recv event's body fields: the label (up to the first '#'), and for long bodies
// their size and SHA-256.
func bodyFields(body []byte) map[string]any {
	label, _, _ := bytes.Cut(body, []byte("#"))
	fields := map[string]any{"body": string(label)}
	if len(body) > 1024 {
		sum := sha256.Sum256(body)
		fields["size"] = len(body)
		fields["sha256"] = hex.EncodeToString(sum[:])
	}
	return fields
}
