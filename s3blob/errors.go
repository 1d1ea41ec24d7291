package s3blob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
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
	// the connection is refused, reset or times out.
	ErrUnreachable = errors.New("object store unreachable")
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
		return fmt.Errorf("s3blob: %s: %w: none found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile: %v", what, ErrCredentials, err)
	}
	if isUnreachable(err) {
		return fmt.Errorf("s3blob: %s: %w: %s did not answer: %v", what, ErrUnreachable, be.endpointName(), rootCause(err))
	}
	return fmt.Errorf("s3blob: %s: %w", what, err)
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

func isUnreachable(err error) bool {
	var ne net.Error
	var me *retry.MaxAttemptsError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.As(err, &ne):
		return true
	case errors.As(err, &me):
		return isUnreachable(me.Err)
	}
	var oe *net.OpError
	return errors.As(err, &oe) || strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF")
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
