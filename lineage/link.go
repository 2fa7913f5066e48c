package lineage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// PictureLinkFor is how long a signed link to a plan's lineage picture
// answers: Slack fetches an image block's picture when it shows the
// message, and keeps its own copy.
const PictureLinkFor = 7 * 24 * time.Hour

// PictureLinkKey is the key picture links are signed with, derived from
// the state store's seal key so that every process of one project (the
// one that queues a Slack message, the server that answers the link)
// signs and checks alike, and the key of nothing else is shown.
func PictureLinkKey(sealKey []byte) []byte {
	m := hmac.New(sha256.New, sealKey)
	m.Write([]byte("refill: lineage picture links"))
	return m.Sum(nil)
}

// PictureLink is publicURL's link to plan id's lineage PNG, answered
// without a session until expires: what an incoming webhook's message
// shows as an image (Slack fetches it, and holds no session).
func PictureLink(key []byte, publicURL, id string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return strings.TrimRight(publicURL, "/") + "/pictures/plans/" + url.PathEscape(id) + "/lineage.png?expires=" + exp + "&sig=" + pictureSig(key, id, exp)
}

// Errors of CheckPictureLink.
var (
	ErrPictureLinkSignature = errors.New("the picture link's signature does not match")
	ErrPictureLinkExpired   = errors.New("the picture link has expired")
)

// CheckPictureLink checks a picture link's expires and sig for plan id at
// now.
func CheckPictureLink(key []byte, id, expires, sig string, now time.Time) error {
	if !hmac.Equal([]byte(sig), []byte(pictureSig(key, id, expires))) {
		return ErrPictureLinkSignature
	}
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return ErrPictureLinkSignature
	}
	if now.After(time.Unix(exp, 0)) {
		return ErrPictureLinkExpired
	}
	return nil
}

func pictureSig(key []byte, id, expires string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "\x00" + expires))
	return hex.EncodeToString(m.Sum(nil))
}
