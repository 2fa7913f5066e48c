package lineage_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill/lineage"
)

func TestPictureLink(t *testing.T) {
	key := lineage.PictureLinkKey([]byte("seal key"))
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	link := lineage.PictureLink(key, "https://refill.example.com/", "p1", now.Add(lineage.PictureLinkFor))
	u, err := url.Parse(link)
	if err != nil || u.Path != "/pictures/plans/p1/lineage.png" || !strings.HasPrefix(link, "https://refill.example.com/pictures/") {
		t.Fatalf("link %q (%v)", link, err)
	}
	q := u.Query()
	if err := lineage.CheckPictureLink(key, "p1", q.Get("expires"), q.Get("sig"), now); err != nil {
		t.Errorf("a fresh link: %v", err)
	}
	for _, tc := range []struct {
		name, id, exp, sig string
		at                 time.Time
		want               error
	}{
		{"another plan", "p2", q.Get("expires"), q.Get("sig"), now, lineage.ErrPictureLinkSignature},
		{"a later expiry", "p1", "9999999999", q.Get("sig"), now, lineage.ErrPictureLinkSignature},
		{"no signature", "p1", q.Get("expires"), "", now, lineage.ErrPictureLinkSignature},
		{"past its time", "p1", q.Get("expires"), q.Get("sig"), now.Add(lineage.PictureLinkFor + time.Second), lineage.ErrPictureLinkExpired},
	} {
		if err := lineage.CheckPictureLink(key, tc.id, tc.exp, tc.sig, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := lineage.CheckPictureLink(lineage.PictureLinkKey([]byte("another")), "p1", q.Get("expires"), q.Get("sig"), now); !errors.Is(err, lineage.ErrPictureLinkSignature) {
		t.Errorf("another project's key: %v", err)
	}
}

// FuzzCheckPictureLink: whatever a link's query carries, the check never
// panics, and passes only the signature made for that plan and expiry.
func FuzzCheckPictureLink(f *testing.F) {
	key := lineage.PictureLinkKey([]byte("seal key"))
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	good, _ := url.Parse(lineage.PictureLink(key, "https://x", "p1", now.Add(time.Hour)))
	f.Add("p1", good.Query().Get("expires"), good.Query().Get("sig"))
	f.Add("p1", "-1", "")
	f.Add("", "99999999999999999999", "zz")
	f.Fuzz(func(t *testing.T, id, expires, sig string) {
		err := lineage.CheckPictureLink(key, id, expires, sig, now)
		if err == nil && (id != "p1" || expires != good.Query().Get("expires") || sig != good.Query().Get("sig")) {
			t.Errorf("passed a link not made for it: %q %q %q", id, expires, sig)
		}
	})
}
