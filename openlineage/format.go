package openlineage

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// The formats the schema asserts (JSON Schema's date-time, uri and uuid),
// checked as JSON Schema defines them: RFC 3339 section 5.6, RFC 3986's
// absolute URI, and RFC 4122's 8-4-4-4-12 hex text.

// parseDateTime reads an RFC 3339 date-time: date, "T", time with optional
// fraction, then "Z" or ±hh:mm. A leap second is accepted only where one
// can fall (23:59:60 in UTC) and is read as the last instant of that
// minute, which Go's time cannot exceed. With offsetOptional, a time with
// no offset at all is read as UTC (see the package documentation).
func parseDateTime(s string, offsetOptional bool) (time.Time, error) {
	if len(s) < 19 {
		return time.Time{}, errors.New("too short")
	}
	num := func(from, to int) (int, bool) {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return time.Time{}, errors.New("the date is not YYYY-MM-DD")
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return time.Time{}, fmt.Errorf("there is no date %04d-%02d-%02d", year, month, day)
	}
	if s[10] != 'T' && s[10] != 't' {
		return time.Time{}, errors.New("the date and time must be joined by T")
	}
	hour, ok1 := num(11, 13)
	minute, ok2 := num(14, 16)
	sec, ok3 := num(17, 19)
	if !ok1 || !ok2 || !ok3 || s[13] != ':' || s[16] != ':' {
		return time.Time{}, errors.New("the time is not hh:mm:ss")
	}
	if hour > 23 || minute > 59 || sec > 60 {
		return time.Time{}, errors.New("the hour, minute or second is out of range")
	}
	rest := s[19:]
	nanos := 0
	if frac, ok := strings.CutPrefix(rest, "."); ok {
		n := 0
		for n < len(frac) && frac[n] >= '0' && frac[n] <= '9' {
			n++
		}
		if n == 0 {
			return time.Time{}, errors.New("a decimal point with no digits after it")
		}
		digits := frac[:min(n, 9)] + strings.Repeat("0", 9-min(n, 9))
		for _, c := range digits {
			nanos = nanos*10 + int(c-'0')
		}
		rest = frac[n:]
	}
	var loc *time.Location
	offset := 0
	switch {
	case rest == "Z" || rest == "z":
		loc = time.UTC
	case rest == "" && offsetOptional:
		loc = time.UTC
	case rest == "":
		return time.Time{}, errors.New("no UTC offset (end with Z or ±hh:mm)")
	default:
		if len(rest) != 6 || (rest[0] != '+' && rest[0] != '-') || rest[3] != ':' {
			return time.Time{}, errors.New("the UTC offset is not Z or ±hh:mm")
		}
		oh, ok1 := numOf(rest[1:3])
		om, ok2 := numOf(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, errors.New("the UTC offset is out of range")
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
		loc = time.FixedZone("", offset)
	}
	if sec == 60 {
		// In UTC, a leap second is always 23:59:60.
		m := ((hour*60+minute-offset/60)%(24*60) + 24*60) % (24 * 60)
		if m != 23*60+59 {
			return time.Time{}, errors.New("a leap second (:60) falls only at 23:59:60 UTC")
		}
		sec, nanos = 59, 999999999
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nanos, loc).UTC(), nil
}

func numOf(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// checkURI accepts an absolute URI: one with a scheme, that Go's URL
// parser reads, with any IPv6 host in brackets.
func checkURI(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	if host := u.Hostname(); strings.Contains(host, ":") {
		if !strings.Contains(u.Host, "[") || !strings.Contains(u.Host, "]") {
			return errors.New("an IPv6 host must be in brackets")
		}
		if a, err := netip.ParseAddr(host); err != nil || a.Zone() != "" {
			return errors.New("the IPv6 host is not an address")
		}
	}
	if !u.IsAbs() {
		return errors.New("it has no scheme (such as https:)")
	}
	return nil
}

// checkUUID accepts 32 hex digits in groups of 8-4-4-4-12, any case.
func checkUUID(s string) error {
	groups := strings.Split(s, "-")
	want := []int{8, 4, 4, 4, 12}
	if len(groups) != len(want) {
		return errors.New("want 8-4-4-4-12 hex digits")
	}
	for i, g := range groups {
		if len(g) != want[i] {
			return errors.New("want 8-4-4-4-12 hex digits")
		}
		for j := 0; j < len(g); j++ {
			c := g[j]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return fmt.Errorf("%q is not a hex digit", c)
			}
		}
	}
	return nil
}
