package refill

import (
	"context"
	"errors"
	"testing"
)

func TestDigestVersionMark(t *testing.T) {
	for _, c := range []struct {
		d       Digest
		version int
		sum     string
	}{
		{NewDigest(1, 3, 0xff), 1, "00000000000000ff"},
		{NewDigest(2, 3, 0xff), 2, "00000000000000ff"},
		{Digest{Checksum: "00000000000000aa"}, 1, "00000000000000aa"}, // stored before versions
		{Digest{Checksum: "v12:00000000000000aa"}, 12, "00000000000000aa"},
		{Digest{Checksum: "v1:00000000000000aa"}, 0, "00000000000000aa"}, // version 1 has no mark
		{Digest{Checksum: "x2:00000000000000aa"}, 0, "00000000000000aa"},
		{Digest{Checksum: "v:00000000000000aa"}, 0, "00000000000000aa"},
	} {
		if c.d.Version() != c.version || c.d.Sum() != c.sum {
			t.Errorf("%q: version %d, sum %q; want %d, %q", c.d.Checksum, c.d.Version(), c.d.Sum(), c.version, c.sum)
		}
	}
	if got := NewDigest(2, 3, 0xff).Checksum; got != "v2:00000000000000ff" {
		t.Errorf("version 2 checksum %q", got)
	}
	if NewDigest(1, 0, 0).Comparable(NewDigest(2, 0, 0)) || !NewDigest(2, 1, 1).Comparable(NewDigest(2, 0, 0)) {
		t.Error("Comparable compares versions")
	}
}

// oneVersion is a warehouse with a single checksum version (SQLite's).
type oneVersion struct{ d Digest }

func (o oneVersion) Digest(context.Context, TableRef, string) (Digest, error) { return o.d, nil }

// twoVersions can compute version 1 and 2.
type twoVersions struct{ oneVersion }

func (twoVersions) DigestVersion(_ context.Context, _ TableRef, _ string, v int) (Digest, error) {
	if v != 1 && v != 2 {
		return Digest{}, ErrDigestVersion
	}
	return NewDigest(v, 1, uint64(v)), nil
}

func TestDigestLike(t *testing.T) {
	ctx := context.Background()
	ref := TableRef{Table: "t"}
	v1 := NewDigest(1, 1, 1)
	if got, err := DigestLike(ctx, oneVersion{v1}, ref, "p", Digest{Checksum: "0000000000000009"}); err != nil || got != v1 {
		t.Errorf("one version, like version 1: %v, %v", got, err)
	}
	if _, err := DigestLike(ctx, oneVersion{v1}, ref, "p", NewDigest(2, 1, 9)); !errors.Is(err, ErrDigestVersion) {
		t.Errorf("one version, like version 2: error %v", err)
	}
	for _, v := range []int{1, 2} {
		if got, err := DigestLike(ctx, twoVersions{}, ref, "p", NewDigest(v, 1, 9)); err != nil || got != NewDigest(v, 1, uint64(v)) {
			t.Errorf("two versions, like version %d: %v, %v", v, got, err)
		}
	}
	if _, err := DigestLike(ctx, twoVersions{}, ref, "p", Digest{Checksum: "v3:0000000000000009"}); !errors.Is(err, ErrDigestVersion) {
		t.Errorf("two versions, like version 3: error %v", err)
	}
}
