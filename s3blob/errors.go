package s3blob

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/toolcas/toolcas/cas"
)

var (
	// ErrBadURL is returned by ParseURL for text that is not a store URL.
	ErrBadURL = errors.New("bad store URL")

	// ErrCredentials is returned by Open and every request when no
	// credentials are configured, or when the server refuses them (an
	// unknown access key, a wrong secret, an expired token).
	ErrCredentials = errors.New("object store credentials")

	// ErrAccessDenied is returned when the server accepts the credentials
	// but refuses the request: they lack a permission on the bucket.
	ErrAccessDenied = errors.New("object store access denied")

	// ErrNoBucket is returned by Open, and by any request, when the bucket
	// does not exist and WithCreate was not given.
	ErrNoBucket = errors.New("bucket does not exist")

	// ErrNoRegion is returned by Open when no region is configured and no
	// custom endpoint is given.
	ErrNoRegion = errors.New("no region")

	// ErrUnreachable is returned when the object store does not answer:
	// its host name does not resolve, or the connection is refused, reset,
	// closed midway or times out.
	ErrUnreachable = errors.New("object store unreachable")

	// ErrTLS is returned when the TLS connection to the object store fails:
	// its certificate is not trusted or names another host, or the
	// endpoint does not speak TLS.
	ErrTLS = errors.New("object store TLS")

	// ErrBadConfig is returned by Open when the AWS configuration (the
	// environment or a profile) holds a malformed endpoint or region.
	ErrBadConfig = errors.New("bad object store configuration")
)

// classify wraps an error from the SDK with the sentinel that says what
// went wrong, and with what the backend was doing.
func (be *Backend) classify(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("s3blob: %s: %w", what, err)
	}
	code, status := apiCode(err)
	switch code {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("s3blob: %s: %w", what, cas.ErrNotFound)
	case "NoSuchBucket":
		return fmt.Errorf("s3blob: %s: %w: %s (casctl init creates it)", what, ErrNoBucket, be.loc.Bucket)
	case "AuthorizationHeaderMalformed":
		// Most often the request was signed for another region than the
		// server's.
		return fmt.Errorf("s3blob: %s: %w: %s refused the request's signature (%s): check AWS_REGION or region= in the store URL, and the credentials", what, ErrCredentials, be.endpointName(), code)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "XAdminUserNotFound":
		return fmt.Errorf("s3blob: %s: %w refused by %s (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", what, ErrCredentials, be.endpointName(), code)
	case "AccessDenied":
		return fmt.Errorf("s3blob: %s: %w: the credentials lack a permission on bucket %s", what, ErrAccessDenied, be.loc.Bucket)
	}
	if code == "" && status == http.StatusForbidden {
		// A HEAD request's answer has no body, so no code: either the
		// credentials are wrong or they lack a permission.
		return fmt.Errorf("s3blob: %s: %w: %s answered 403 Forbidden: wrong credentials (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or no permission on bucket %s",
			what, ErrCredentials, be.endpointName(), be.loc.Bucket)
	}
	if isCredentialRetrieval(err) {
		return fmt.Errorf("s3blob: %s: %w: %s", what, ErrCredentials, credentialFailure(err))
	}
	if isTLS(err) {
		return fmt.Errorf("s3blob: %s: %w: the TLS connection to %s failed: %v (check that the endpoint speaks https and that its certificate is trusted: AWS_CA_BUNDLE)",
			what, ErrTLS, be.endpointName(), rootCause(err))
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("s3blob: %s: %w: the host of %s does not resolve: %v", what, ErrUnreachable, be.endpointName(), dns)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "proxyconnect" {
		return fmt.Errorf("s3blob: %s: %w: the proxy to %s did not answer: %v (check HTTPS_PROXY, HTTP_PROXY)", what, ErrUnreachable, be.endpointName(), rootCause(err))
	}
	if isUnreachable(err) {
		return fmt.Errorf("s3blob: %s: %w: %s did not answer: %v", what, ErrUnreachable, be.endpointName(), rootCause(err))
	}
	return fmt.Errorf("s3blob: %s: %w", what, err)
}

// credentialFailure says what failed when credentials could not be had.
func credentialFailure(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "no EC2 IMDS role found") || strings.Contains(msg, "failed to refresh cached credentials, no") ||
		strings.Contains(msg, "static credentials are empty") {
		return fmt.Sprintf("none found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (%v)", err)
	}
	return fmt.Sprintf("could not get them: %v", err)
}

// isTLS reports whether err is a failed TLS handshake or certificate check.
func isTLS(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) ||
		// net/http replaces the tls.RecordHeaderError of a plain HTTP
		// answer with an error of its own, known only by its text.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

func apiCode(err error) (string, int) {
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	if code == "" && status == http.StatusNotFound {
		code = "NotFound"
	}
	return code, status
}

func isPreconditionFailed(err error) bool {
	code, status := apiCode(err)
	return code == "PreconditionFailed" || status == http.StatusPreconditionFailed
}

func isConditionalConflict(err error) bool {
	code, status := apiCode(err)
	return code == "ConditionalRequestConflict" || (code == "" && status == http.StatusConflict)
}

func isCredentialRetrieval(err error) bool {
	return strings.Contains(err.Error(), "failed to retrieve credentials") ||
		strings.Contains(err.Error(), "no EC2 IMDS role found")
}

// isUnreachable reports whether err says the server did not answer: the
// connection was refused, reset, cut or timed out.
func isUnreachable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The server closed the connection before it answered.
		return true
	case errors.Is(err, net.ErrClosed):
		// So did it while the request's body was being sent: net/http
		// closes the connection once it reads the end of it, and the
		// write under way fails on the closed connection (seen when the
		// server was killed during a part's upload). A request given up
		// by its caller is context's error, told apart before this.
		return true
	case strings.Contains(err.Error(), "server closed idle connection"):
		// So did it, on a connection kept from an earlier request: net/http
		// says so with an error of its own, known only by its text (seen
		// when the server was killed between two requests).
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return false
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
