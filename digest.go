package refill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Checksums carry the version of the algorithm that computed them, because
// they outlive it: the state store keeps a snapshot's digest, a run's
// before and after, a proof's builds, and a rollback compares the rows of
// today with a digest taken before an upgrade changed how the warehouse
// computes them. A checksum is written "v<N>:" and 16 hex digits; version
// 1, the first, has no mark, so every checksum stored before versions
// existed reads as version 1. Versions are per driver (a checksum is only
// comparable within one warehouse): SQLite computes version 1, PostgreSQL
// version 2 and still computes 1 on request.

// DigestV1 is the version of a checksum without a version mark.
const DigestV1 = 1

// ErrDigestVersion is a checksum of a version the warehouse cannot compute
// (one from a newer refill), so the rows cannot be compared with it.
var ErrDigestVersion = errors.New("checksum version not supported")

// NewDigest is the digest of rows rows whose row hashes sum to sum (modulo
// 2^64) under the given version of the warehouse's checksum.
func NewDigest(version int, rows int64, sum uint64) Digest {
	if version <= DigestV1 {
		return Digest{Rows: rows, Checksum: fmt.Sprintf("%016x", sum)}
	}
	return Digest{Rows: rows, Checksum: fmt.Sprintf("v%d:%016x", version, sum)}
}

// Version is the version of the checksum: the N of a "vN:" mark, or 1
// without one. A mark that does not parse is version 0, which no
// warehouse computes.
func (d Digest) Version() int {
	mark, _, ok := strings.Cut(d.Checksum, ":")
	if !ok {
		return DigestV1
	}
	v, err := strconv.Atoi(strings.TrimPrefix(mark, "v"))
	if err != nil || !strings.HasPrefix(mark, "v") || v < 2 {
		return 0
	}
	return v
}

// Sum is the checksum's 16 hex digits, without the version mark.
func (d Digest) Sum() string {
	if _, sum, ok := strings.Cut(d.Checksum, ":"); ok {
		return sum
	}
	return d.Checksum
}

// Comparable reports whether d and o were computed by the same version, so
// that equal rows give equal digests. Two stored digests that are not
// comparable say nothing about each other's rows.
func (d Digest) Comparable(o Digest) bool { return d.Version() == o.Version() }

// Digester computes partition digests: a Rehearser, a WarehouseTx.
type Digester interface {
	Digest(ctx context.Context, t TableRef, partition string) (Digest, error)
}

// VersionedDigester is a warehouse (or one of its transactions) that can
// still compute the checksums of earlier versions than Digest does.
type VersionedDigester interface {
	// DigestVersion is Digest as the given version computed it, or an
	// error wrapping ErrDigestVersion when the warehouse cannot.
	DigestVersion(ctx context.Context, t TableRef, partition string, version int) (Digest, error)
}

// DigestLike is partition's digest computed by the version that computed
// like, so that the two compare: a digest stored before an upgrade is
// compared with the rows as they are now, the old way. A Digester that only
// has one version can only match that one; any other is an error wrapping
// ErrDigestVersion.
func DigestLike(ctx context.Context, dg Digester, t TableRef, partition string, like Digest) (Digest, error) {
	d, err := DigestAt(ctx, dg, t, partition, like.Version())
	if errors.Is(err, ErrDigestVersion) {
		return Digest{}, fmt.Errorf("%w: checksum %s of %s is of version %d, which this refill cannot compute; compare it with the refill that took it, or a newer one",
			ErrDigestVersion, like.Checksum, t.Table, like.Version())
	}
	return d, err
}

// DigestAt is partition's digest computed by the given checksum version.
func DigestAt(ctx context.Context, dg Digester, t TableRef, partition string, version int) (Digest, error) {
	if v, ok := dg.(VersionedDigester); ok {
		return v.DigestVersion(ctx, t, partition, version)
	}
	d, err := dg.Digest(ctx, t, partition)
	if err == nil && d.Version() != version {
		return Digest{}, fmt.Errorf("%w: the digest of %s is of version %d, not %d", ErrDigestVersion, t.Table, d.Version(), version)
	}
	return d, err
}
