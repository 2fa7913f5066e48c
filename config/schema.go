package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"

	"github.com/refill-dev/refill"
)

// index maps key paths of the parsed document to the lines they are on, and
// token positions back to key paths. Validation runs on decoded structs that
// have forgotten where they came from; the index is how their errors still
// name a line.
//
// It is built by walking the AST rather than by querying it with
// yaml.PathString, because dataset names are user text and a name with a dot,
// quote or bracket in it would be misread as path syntax.
type index struct {
	lines map[string]int // "datasets.a.upstream" -> line of the key
	paths map[[2]int]string
}

func newIndex() *index {
	return &index{lines: map[string]int{"": 1}, paths: map[[2]int]string{}}
}

func (ix *index) record(path string, keyTok, valTok *token.Token) {
	if keyTok != nil && keyTok.Position != nil {
		if _, ok := ix.lines[path]; !ok {
			ix.lines[path] = keyTok.Position.Line
		}
		ix.paths[[2]int{keyTok.Position.Line, keyTok.Position.Column}] = path
	}
	if valTok != nil && valTok.Position != nil {
		pos := [2]int{valTok.Position.Line, valTok.Position.Column}
		if _, ok := ix.paths[pos]; !ok {
			ix.paths[pos] = path
		}
	}
}

// line returns the line of path, or of its nearest recorded parent: a key
// that was not written (a missing table:, say) is reported at the mapping
// that should have held it. Paths inside YAML aliases are not recorded and
// fall back the same way.
func (ix *index) line(path string) int {
	for {
		if l, ok := ix.lines[path]; ok {
			return l
		}
		path = parentPath(path)
	}
}

// pathAt returns the key path of the key or value at line:col, or "".
func (ix *index) pathAt(line, col int) string {
	return ix.paths[[2]int{line, col}]
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// child appends map keys to path, quoting keys that are not plain names so
// the printed path stays unambiguous.
func child(path string, keys ...string) string {
	for _, key := range keys {
		if !plainKey.MatchString(key) {
			key = strconv.Quote(key)
		}
		if path != "" {
			path += "."
		}
		path += key
	}
	return path
}

// elem appends a list index to path.
func elem(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// parentPath strips the last key or index from path. It understands the
// quoting that child adds.
func parentPath(path string) string {
	if path == "" {
		return ""
	}
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if strings.HasSuffix(path, `"`) {
		// Find the opening quote of a quoted last key by unquoting prefixes.
		for i := len(path) - 2; i >= 0; i-- {
			if path[i] != '"' || (i > 0 && path[i-1] != '.') {
				continue
			}
			if _, err := strconv.Unquote(path[i:]); err == nil {
				if i == 0 {
					return ""
				}
				return path[:i-1]
			}
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// checkShape walks the document against the raw structs' yaml tags before
// anything is decoded. goccy's strict mode stops at the first unknown field
// and quietly truncates 1.5 into an int; this walk reports every unknown key
// and every value of the wrong shape in one go, each at its own line, and
// fills ix along the way.
func checkShape(n ast.Node, t reflect.Type, path string, ix *index, errs *errorList) {
	n = unwrap(n)
	if n == nil {
		return
	}
	switch n.(type) {
	case *ast.NullNode, *ast.AliasNode:
		// Null is "not given" for every field. An alias points at an
		// anchor that was checked where it was written.
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	line := 1
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		line = tk.Position.Line
	}
	mismatch := func() {
		errs.add(line, path, "want %s, got %s", describeType(t), describeNode(n))
	}
	switch t.Kind() {
	case reflect.Interface:
		walkAny(n, path, ix)
	case reflect.Struct:
		m, ok := n.(ast.MapNode)
		if !ok {
			mismatch()
			return
		}
		fields := yamlFields(t)
		keys := 0
		for it := m.MapRange(); it.Next(); {
			kv := it.KeyValue()
			if kv.Key != nil && kv.Key.IsMergeKey() {
				checkMerge(kv, keys, t, path, ix, errs)
				continue
			}
			keys++
			name, ok := keyName(kv, path, errs)
			if !ok {
				continue
			}
			p := child(path, name)
			ix.record(p, kv.Key.GetToken(), valueToken(kv.Value))
			f, ok := fields[name]
			if !ok {
				errs.add(kv.Key.GetToken().Position.Line, p, "unknown field %q %s", name, known(name, slices.Sorted(mapKeys(fields)), len(fields)))
				continue
			}
			checkShape(kv.Value, f.Type, p, ix, errs)
		}
	case reflect.Map:
		m, ok := n.(ast.MapNode)
		if !ok {
			mismatch()
			return
		}
		keys := 0
		for it := m.MapRange(); it.Next(); {
			kv := it.KeyValue()
			if kv.Key != nil && kv.Key.IsMergeKey() {
				checkMerge(kv, keys, t, path, ix, errs)
				continue
			}
			keys++
			name, ok := keyName(kv, path, errs)
			if !ok {
				continue
			}
			p := child(path, name)
			ix.record(p, kv.Key.GetToken(), valueToken(kv.Value))
			checkShape(kv.Value, t.Elem(), p, ix, errs)
		}
	case reflect.Slice:
		s, ok := n.(*ast.SequenceNode)
		if !ok {
			mismatch()
			return
		}
		for i, v := range s.Values {
			p := elem(path, i)
			ix.record(p, valueToken(v), valueToken(v))
			checkShape(v, t.Elem(), p, ix, errs)
		}
	case reflect.String:
		switch n.(type) {
		case *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
			mismatch()
		}
	case reflect.Int:
		if _, ok := n.(*ast.IntegerNode); !ok {
			mismatch()
		}
	case reflect.Float64:
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
		case *ast.InfinityNode, *ast.NanNode:
			// A NaN limit passes every comparison, and neither encodes as
			// JSON, which plans are stored in.
			errs.add(line, path, "want a finite number, got %s", describeNode(n))
		default:
			mismatch()
		}
	}
}

// checkMerge checks a merge key ("<<: *base"). The anchored mapping it names
// was checked where it was written; an inline "<<: {...}" or a list of them
// is checked here as if its keys were written in place.
//
// goccy/go-yaml lets a merge override the keys written before it in the same
// mapping, where YAML says written keys always win; requiring the merge
// first makes both readings agree.
func checkMerge(kv *ast.MappingValueNode, keysBefore int, t reflect.Type, path string, ix *index, errs *errorList) {
	line := 1
	if tk := kv.Key.GetToken(); tk != nil && tk.Position != nil {
		line = tk.Position.Line
	}
	if keysBefore > 0 {
		errs.add(line, path, "put the merge key << before the other keys of this mapping, so that the keys written here override the merged ones")
	}
	if seq, ok := unwrap(kv.Value).(*ast.SequenceNode); ok {
		for _, v := range seq.Values {
			checkShape(v, t, path, ix, errs)
		}
		return
	}
	checkShape(kv.Value, t, path, ix, errs)
}

// walkAny indexes a free-form value (job env) without checking it.
func walkAny(n ast.Node, path string, ix *index) {
	switch n := unwrap(n).(type) {
	case ast.MapNode:
		for it := n.MapRange(); it.Next(); {
			kv := it.KeyValue()
			if kv.Key == nil || kv.Key.IsMergeKey() {
				continue
			}
			if s, ok := unwrap(kv.Key).(ast.ScalarNode); ok {
				p := child(path, fmt.Sprint(s.GetValue()))
				ix.record(p, kv.Key.GetToken(), valueToken(kv.Value))
				walkAny(kv.Value, p, ix)
			}
		}
	case *ast.SequenceNode:
		for i, v := range n.Values {
			p := elem(path, i)
			ix.record(p, valueToken(v), valueToken(v))
			walkAny(v, p, ix)
		}
	}
}

// unwrap looks through anchors and tags to the value they decorate.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

func valueToken(n ast.Node) *token.Token {
	if n == nil {
		return nil
	}
	if u := unwrap(n); u != nil {
		n = u
	}
	return n.GetToken()
}

// keyName returns a mapping key as text. Keys are names in refill.yaml, so a
// key that is itself a list or mapping is an error.
func keyName(kv *ast.MappingValueNode, path string, errs *errorList) (string, bool) {
	if kv.Key == nil || kv.Key.GetToken() == nil || kv.Key.GetToken().Position == nil {
		return "", false
	}
	if s, ok := unwrap(kv.Key).(ast.ScalarNode); ok {
		if _, null := s.(*ast.NullNode); !null {
			return fmt.Sprint(s.GetValue()), true
		}
	}
	errs.add(kv.Key.GetToken().Position.Line, path, "want a plain name as key, got %s", describeNode(kv.Key))
	return "", false
}

// yamlFields maps the yaml tag names of a struct's fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// describeType says in YAML's words what a Go field holds.
func describeType(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	}
	return "a value"
}

// describeNode says what the user wrote, quoting short scalars so that
// `lookback: 1.5` reads back as "the number 1.5".
func describeNode(n ast.Node) string {
	n = unwrap(n)
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case ast.MapNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.IntegerNode, *ast.FloatNode:
		return "the number " + clip(v.GetToken().Value)
	case *ast.InfinityNode, *ast.NanNode:
		return clip(v.GetToken().Value)
	case *ast.BoolNode:
		return "the boolean " + clip(v.GetToken().Value)
	case *ast.StringNode:
		return "the text " + strconv.Quote(clip(v.Value))
	case *ast.LiteralNode:
		return "a block of text"
	}
	return "a " + n.Type().YAMLName()
}

func clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:37]) + "..."
	}
	return s
}

// known formats the valid names for an "unknown X" message (refill.Known).
func known(got string, names []string, limit int) string { return refill.Known(got, names, limit) }

// keyBefore guesses the key path at line:col of a document that failed to
// parse, so that syntax errors name a key like every other error. With no
// AST to walk, it replays the tokens up to the error and keeps a stack of
// keys: block keys by indentation column, flow keys by bracket depth, and "-"
// or "," entries as list indexes. It only has to point a person at the right
// spot, so odd documents may get a shorter path, never a panic.
func keyBefore(data []byte, line, col int) (key string) {
	defer func() {
		if recover() != nil {
			key = ""
		}
	}()
	type frame struct {
		col   int
		flow  int    // bracket depth the frame was opened at; 0 in block style
		seg   string // the key, or "" for a list
		index int    // entries seen so far in a list
		list  bool
	}
	var stack []frame
	depth := 0
	pop := func(pred func(frame) bool) {
		for len(stack) > 0 && pred(stack[len(stack)-1]) {
			stack = stack[:len(stack)-1]
		}
	}
	// siblings pops what a new entry at the current bracket depth replaces.
	siblings := func(f frame) bool { return f.flow > depth || (f.flow == depth && !f.list) }
	for _, tk := range lexer.Tokenize(string(data)) {
		pos := tk.Position
		if pos == nil {
			continue
		}
		if pos.Line > line || (pos.Line == line && pos.Column > col) {
			break
		}
		isKey := tk.Next != nil && tk.Next.Type == token.MappingValueType
		if pos.Line == line && pos.Column == col && !isKey {
			// The error is at this token: a key names itself (a duplicate,
			// say), anything else belongs to the key before it.
			break
		}
		switch {
		case tk.Type == token.MappingStartType:
			depth++
		case tk.Type == token.SequenceStartType:
			depth++
			stack = append(stack, frame{col: pos.Column, flow: depth, list: true})
		case tk.Type == token.MappingEndType, tk.Type == token.SequenceEndType:
			pop(func(f frame) bool { return f.flow >= depth })
			depth = max(depth-1, 0)
		case tk.Type == token.CollectEntryType:
			pop(siblings)
			if n := len(stack); n > 0 && stack[n-1].list && stack[n-1].flow == depth {
				stack[n-1].index++
			}
		case tk.Type == token.SequenceEntryType && depth == 0:
			// An indentless list ("rules:\n- name: a") starts at its key's
			// column, so only deeper frames and earlier entries end here.
			pop(func(f frame) bool { return f.col > pos.Column })
			if n := len(stack); n > 0 && stack[n-1].list && stack[n-1].col == pos.Column {
				stack[n-1].index++
			} else {
				stack = append(stack, frame{col: pos.Column, list: true})
			}
		case isKey:
			if depth > 0 {
				pop(siblings)
			} else {
				pop(func(f frame) bool { return f.col >= pos.Column })
			}
			stack = append(stack, frame{col: pos.Column, flow: depth, seg: tk.Value})
		}
	}
	path := ""
	for _, f := range stack {
		if f.list {
			path = elem(path, f.index)
		} else {
			path = child(path, f.seg)
		}
	}
	return path
}
