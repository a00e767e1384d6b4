package oauthclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// parsePrivateKey reads a PEM private key (PKCS#8, SEC 1 EC or PKCS#1
// RSA) and the JWS algorithm it signs with: ES256, ES384 or ES512 by
// curve, RS256 for RSA.
func parsePrivateKey(pemBytes []byte) (any, jose.SignatureAlgorithm, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, "", errors.New("the private key is not PEM")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, "", fmt.Errorf("parsing the private key: %w", err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jose.ES256, nil
		case elliptic.P384():
			return k, jose.ES384, nil
		case elliptic.P521():
			return k, jose.ES512, nil
		}
		return nil, "", errors.New("the EC private key's curve is not P-256, P-384 or P-521")
	case *rsa.PrivateKey:
		return k, jose.RS256, nil
	}
	return nil, "", fmt.Errorf("the private key is a %T; use an EC or RSA key", key)
}

// CheckPrivateKey reports whether pemBytes is a private key toolgate can
// sign client assertions with.
func CheckPrivateKey(pemBytes []byte) error {
	_, _, err := parsePrivateKey(pemBytes)
	return err
}
