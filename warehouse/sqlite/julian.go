package sqlite

import (
	"math"
	"strconv"
	"strings"
)

// This file reads a value the way SQLite's julianday(v) does, so that the
// profile aggregate can judge time order and future timestamps in Go
// instead of calling julianday() for each timestamp of each row: four calls
// a row cost about 600 ms per million rows, more than twice the scan
// itself, where this costs a tenth of that. It is a port of
// isDate, parseDateOrTime, parseYyyyMmDd, parseHhMmSs, parseTimezone,
// setRawDateNumber and computeJD from SQLite 3.54's date.c, and the test
// TestJulianMatchesSQLite and the fuzz target FuzzJulian hold it to the
// bundled SQLite's own answers.
//
// SQLite keeps an instant as iJD, integer milliseconds since noon on
// 4714-11-24 BC (the Julian day number times 86,400,000), so two values
// compare the same way in Go as their julianday() values do in SQL.

// maxJulianMS is the largest iJD SQLite accepts: 9999-12-31 23:59:59.999.
const maxJulianMS = 464269060799999

// unixEpochJulianMS is 1970-01-01 00:00:00 UTC as an iJD.
const unixEpochJulianMS = 210866760000000

// julianMS returns the iJD of a value as julianday(v) reads it, and false
// where julianday(v) is NULL: for NULL, for text that is not a date, time or
// number, and for instants outside 0000-01-01 .. 9999-12-31. Integers and
// reals are Julian day numbers, as in SQLite. A value 'now' (any case) is
// read as now, an iJD.
func julianMS(v any, now int64) (int64, bool) {
	switch v := v.(type) {
	case nil:
		return 0, false
	case int64:
		return rawDateNumber(float64(v))
	case float64:
		return rawDateNumber(v)
	case string:
		return julianText(v, now)
	case []byte:
		return julianText(string(v), now)
	case bool: // not a type SQLite hands over, but cheap to get right
		if v {
			return rawDateNumber(1)
		}
		return rawDateNumber(0)
	}
	return 0, false
}

// julianText parses text as parseDateOrTime does. SQLite reads the text as
// a C string, so it ends at the first NUL.
func julianText(z string, now int64) (int64, bool) {
	if jd, ok := julianCommon(z); ok {
		return jd, true
	}
	if i := strings.IndexByte(z, 0); i >= 0 {
		z = z[:i]
	}
	var p dateTime
	switch {
	case p.parseYMD(z), p.parseHMS(z):
	case asciiEqualFold(z, "now"), asciiEqualFold(z, "subsec"), asciiEqualFold(z, "subsecond"):
		return now, true
	default:
		r, ok := atof(z)
		if !ok {
			return 0, false
		}
		return rawDateNumber(r)
	}
	if !p.computeJD() || p.iJD < 0 || p.iJD > maxJulianMS {
		return 0, false
	}
	return p.iJD, true
}

// julianCommon reads the forms nearly every timestamp column holds,
// YYYY-MM-DD HH:MM:SS and YYYY-MM-DDTHH:MM:SS with an optional Z, without
// the general parser, which takes several times as long. It gives up (and
// the general parser decides) on anything else, including out-of-range
// fields.
func julianCommon(z string) (int64, bool) {
	if len(z) != 19 && (len(z) != 20 || z[19] != 'Z' && z[19] != 'z') {
		return 0, false
	}
	if z[4] != '-' || z[7] != '-' || z[10] != ' ' && z[10] != 'T' || z[13] != ':' || z[16] != ':' {
		return 0, false
	}
	for _, i := range [...]int{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18} {
		if z[i]-'0' > 9 {
			return 0, false
		}
	}
	two := func(i int) int { return int(z[i]-'0')*10 + int(z[i+1]-'0') }
	p := dateTime{y: two(0)*100 + two(2), m: two(5), d: two(8), hh: two(11), mm: two(14), validYMD: true, validHMS: true}
	sec := two(17)
	if p.m < 1 || p.m > 12 || p.d < 1 || p.d > 31 || p.hh > 23 || p.mm > 59 || sec > 59 {
		return 0, false
	}
	p.s = float64(sec)
	p.computeJD()
	return p.iJD, true
}

// rawDateNumber is setRawDateNumber followed by computeJD: a number is a
// Julian day number, valid from 0 to 5373484.5 (exclusive).
func rawDateNumber(r float64) (int64, bool) {
	if !(r >= 0 && r < 5373484.5) {
		return 0, false
	}
	jd := int64(float64(r*86400000.0) + 0.5)
	if jd > maxJulianMS {
		return 0, false
	}
	return jd, true
}

// dateTime is the part of SQLite's DateTime that parsing one value uses.
type dateTime struct {
	iJD      int64
	y, m, d  int
	hh, mm   int
	s        float64
	tz       int // minutes east of UTC
	validYMD bool
	validHMS bool
}

// digits is getDigits for one group: n digits at z[i:] with a value in
// [lo, hi]. It returns the value and whether it was there.
func digits(z string, i, n, lo, hi int) (int, bool) {
	if i+n > len(z) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(z[i : i+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, v >= lo && v <= hi
}

// at returns z[i], or 0 past the end as a C string would.
func at(z string, i int) byte {
	if i < len(z) {
		return z[i]
	}
	return 0
}

// isSpace is sqlite3Isspace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseYMD is parseYyyyMmDd: [-]YYYY-MM-DD, then blanks or T's, then an
// optional time. It reports success.
func (p *dateTime) parseYMD(z string) bool {
	i, neg := 0, false
	if at(z, 0) == '-' {
		i, neg = 1, true
	}
	y, ok := digits(z, i, 4, 0, 14712)
	if !ok || at(z, i+4) != '-' {
		return false
	}
	m, ok := digits(z, i+5, 2, 1, 12)
	if !ok || at(z, i+7) != '-' {
		return false
	}
	d, ok := digits(z, i+8, 2, 1, 31)
	if !ok {
		return false
	}
	i += 10
	for c := at(z, i); isSpace(c) || c == 'T'; c = at(z, i) {
		i++
	}
	switch {
	case p.parseHMS(z[i:]):
		if p.hh == 24 {
			// 24:00 is midnight at the end of the day.
			p.hh = 0
			d++
			if mx := daysOfMonth(y, m); d > mx {
				d -= mx
				m++
				if m > 12 {
					m = 1
					y++
				}
			}
		}
	case i >= len(z):
		p.validHMS = false
	default:
		return false
	}
	if neg {
		y = -y
	}
	p.validYMD = true
	p.y, p.m, p.d = y, m, d
	return true
}

// parseHMS is parseHhMmSs: HH:MM[:SS[.fff...]] and an optional time zone.
func (p *dateTime) parseHMS(z string) bool {
	h, ok := digits(z, 0, 2, 0, 24)
	if !ok || at(z, 2) != ':' {
		return false
	}
	m, ok := digits(z, 3, 2, 0, 59)
	if !ok {
		return false
	}
	i := 5
	s, ms := 0, 0.0
	if at(z, i) == ':' {
		s, ok = digits(z, i+1, 2, 0, 59)
		if !ok {
			return false
		}
		i += 3
		if at(z, i) == '.' && isDigit(at(z, i+1)) {
			scale := 1.0
			i++
			for ; isDigit(at(z, i)); i++ {
				// The explicit conversions keep Go from fusing the
				// multiply and add, which C does not do either.
				ms = float64(ms*10) + float64(z[i]) - '0'
				scale = float64(scale * 10)
			}
			ms /= scale
			if ms > 0.999 {
				ms = 0.999
			}
		}
	}
	if h == 24 && (m != 0 || s != 0 || ms != 0) {
		return false
	}
	p.validHMS = true
	p.hh, p.mm = h, m
	p.s = float64(s) + ms
	return p.parseTimezone(z[i:])
}

// parseTimezone is parseTimezone: blanks, then nothing, Z, or [+-]HH:MM,
// then blanks. It reports success.
func (p *dateTime) parseTimezone(z string) bool {
	i := 0
	for isSpace(at(z, i)) {
		i++
	}
	p.tz = 0
	sign := 1
	switch c := at(z, i); c {
	case 0:
		return true
	case 'Z', 'z':
		i++
	case '-', '+':
		if c == '-' {
			sign = -1
		}
		h, ok := digits(z, i+1, 2, 0, 14)
		if !ok || at(z, i+3) != ':' {
			return false
		}
		m, ok := digits(z, i+4, 2, 0, 59)
		if !ok {
			return false
		}
		i += 6
		p.tz = sign * (m + h*60)
	default:
		return false
	}
	for isSpace(at(z, i)) {
		i++
	}
	return i >= len(z)
}

// computeJD is computeJD: the iJD of the parsed fields, and false for a year
// outside -4713..9999.
func (p *dateTime) computeJD() bool {
	y, m, d := 2000, 1, 1 // a time alone is on 2000-01-01
	if p.validYMD {
		y, m, d = p.y, p.m, p.d
	} else if p.validHMS && p.hh == 24 {
		p.hh = 0
		d = 2
	}
	if y < -4713 || y > 9999 {
		return false
	}
	if m <= 2 {
		y--
		m += 12
	}
	// int32 arithmetic as in C; Go's division truncates toward zero as C's.
	a := int32(y+4800) / 100
	b := 38 - a + a/4
	x1 := 36525 * int32(y+4716) / 100
	x2 := 306001 * int32(m+1) / 10000
	p.iJD = int64(float64((float64(x1+x2+int32(d)+b) - 1524.5) * 86400000))
	if p.validHMS {
		p.iJD += int64(p.hh*3600000+p.mm*60000) + int64(float64(p.s*1000)+0.5)
		p.iJD -= int64(p.tz * 60000)
	}
	return true
}

func daysOfMonth(y, m int) int {
	switch {
	case m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0):
		return 29
	case m == 2:
		return 28
	case m == 4 || m == 6 || m == 9 || m == 11:
		return 30
	}
	return 31
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// asciiEqualFold is sqlite3StrICmp(s, t) == 0: it folds ASCII letters only.
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range len(s) {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// atof reads text as a number the way sqlite3AtoF accepts one: blanks, an
// optional sign, digits with an optional decimal point (at least one digit),
// an optional exponent, blanks, and nothing else. Go's conversion is
// correctly rounded where SQLite's may differ in the last bit for mantissas
// over 19 digits; no timestamp has one.
func atof(z string) (float64, bool) {
	i := 0
	for isSpace(at(z, i)) {
		i++
	}
	start := i
	if c := at(z, i); c == '+' || c == '-' {
		i++
	}
	mantissa := 0
	for isDigit(at(z, i)) {
		i, mantissa = i+1, mantissa+1
	}
	if at(z, i) == '.' {
		i++
		for isDigit(at(z, i)) {
			i, mantissa = i+1, mantissa+1
		}
	}
	if mantissa == 0 {
		return 0, false
	}
	if c := at(z, i); c == 'e' || c == 'E' {
		j := i + 1
		if c := at(z, j); c == '+' || c == '-' {
			j++
		}
		if !isDigit(at(z, j)) {
			return 0, false // SQLite leaves the e as trailing text
		}
		for isDigit(at(z, j)) {
			j++
		}
		i = j
	}
	end := i
	for isSpace(at(z, i)) {
		i++
	}
	if i < len(z) {
		return 0, false
	}
	r, err := strconv.ParseFloat(z[start:end], 64)
	if err != nil && !math.IsInf(r, 0) {
		return 0, false
	}
	return r, true
}
