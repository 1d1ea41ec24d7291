package s3blob

import (
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/cas/backendtest"
	"github.com/toolcas/toolcas/internal/versitygw"
)

// TestConformance runs the blob backends' conformance suite against a real
// S3 server (versitygw, posix backend), a fresh bucket for every case, with
// 5 MiB parts so that the large blob goes up as a multipart upload.
func TestConformance(t *testing.T) {
	srv := versitygw.Start(t)
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		be := openOn(t, srv)
		return backendtest.Fixture{
			Backend: be,
			Corrupt: func(t *testing.T, b cas.Blob, data []byte) { overwrite(t, be, b, data) },
		}
	})
}
