package flows

import (
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds on the JSON schemas a flow declares (its input, an agent's
// output): checked at registration, so that validating a user's data
// against another user's schema can neither run for hours nor build a
// huge error (docs/operators.md, "Limits on what one caller sends").
const (
	// MaxSchemaBytes bounds one schema document as JSON.
	MaxSchemaBytes = 256 << 10
	// MaxSchemaPatternBytes bounds one regular expression of a schema
	// (pattern, a patternProperties key).
	MaxSchemaPatternBytes = 4 << 10
	// MaxSchemaFanout bounds how many subschemas one value of the data
	// may be checked against at once: anyOf, allOf, oneOf, $ref and the
	// rest that apply to the same value multiply along the data's depth,
	// so a 3 KB schema can ask for 2^40 checks of the value 1.
	MaxSchemaFanout = 1024
	// MaxInstanceDepth bounds the nesting of data validated against a
	// flow's schema; the fan-out bound is computed to this depth.
	MaxInstanceDepth = 64
)

// schemaCost refuses a compiled schema whose validation cost is not
// bounded by MaxSchemaFanout per value of the data, or that holds a
// pattern past MaxSchemaPatternBytes. The cost of a value is the number
// of subschemas applied to it: those reached from the schema applied to
// it through the applicators that check the same value (allOf, anyOf,
// oneOf, not, if/then/else, $ref, dependentSchemas), and, for a value at
// depth d, those its parent's schemas apply to their children at that
// key or index. Children at different keys are different values, so a
// schema's properties take the most costly one, not the sum: a
// recursive tree schema costs its depth, a schema that doubles at each
// level costs 2^depth. validation then does at most MaxSchemaFanout
// checks per value of the data. What it returns is the schema's weight,
// from which ValidationWork estimates a validation's cost.
func schemaCost(root *jsonschema.Schema) (schemaWeight, error) {
	c := &costWalk{memo: map[costKey]int64{}, open: map[costKey]bool{}, seen: map[*jsonschema.Schema]bool{}}
	if err := c.patterns(root); err != nil {
		return schemaWeight{}, err
	}
	w := schemaWeight{patternBytes: c.patternBytes}
	for d := 0; d <= MaxInstanceDepth; d++ {
		n := c.cost(root, d)
		if c.loop != nil {
			return schemaWeight{}, fmt.Errorf("%s refers to itself without descending into the data (through $ref, allOf, anyOf, oneOf or not): validation would never end", where(c.loop))
		}
		if n > MaxSchemaFanout {
			return schemaWeight{}, fmt.Errorf("validating one value would check it against more than %d subschemas (at %s, for data %d levels deep): anyOf, allOf, oneOf and $ref nested in each other multiply; flatten them", MaxSchemaFanout, where(c.worst), d)
		}
		w.fanout = max(w.fanout, n)
	}
	return w, nil
}

// schemaWeight is what validating data against a schema may cost per
// byte of the data: the most subschemas one value is checked against
// (at most MaxSchemaFanout), and the bytes of all its regular
// expressions (a match costs up to the pattern's size per byte matched,
// each step a thousandth of a subschema's check, as measured).
type schemaWeight struct {
	fanout       int64
	patternBytes int64
}

// work is the estimated cost of validating dataBytes of JSON, in checks
// of one subschema against one byte.
func (w schemaWeight) work(dataBytes int) int64 {
	return (w.fanout + w.patternBytes/1024) * int64(dataBytes)
}

type costKey struct {
	s *jsonschema.Schema
	d int
}

type costWalk struct {
	memo  map[costKey]int64
	open  map[costKey]bool            // on the in-place path now
	seen  map[*jsonschema.Schema]bool // checked for patterns
	worst *jsonschema.Schema          // the deepest schema whose cost passed the bound
	loop  *jsonschema.Schema
	// patternBytes sums the schema's regular expressions.
	patternBytes int64
}

// over is the saturated cost: more than the bound, however much.
const over = MaxSchemaFanout + 1

// cost is how many subschemas s applies to one value at depth d below
// the value s is applied to, saturated at over.
func (c *costWalk) cost(s *jsonschema.Schema, d int) int64 {
	if s == nil || c.loop != nil {
		return 0
	}
	k := costKey{s, d}
	if v, ok := c.memo[k]; ok {
		return v
	}
	if c.open[k] {
		c.loop = s
		return over
	}
	c.open[k] = true
	var n int64
	if d == 0 {
		n = 1
	}
	for _, sub := range inPlace(s) {
		n = add(n, c.cost(sub, d))
	}
	delete(c.open, k)
	if d > 0 {
		n = add(n, c.children(s, d-1))
	}
	if n >= over && c.worst == nil {
		c.worst = s
	}
	c.memo[k] = n
	return n
}

// children is the cost, at depth d below a child, of what s applies to
// its children: the costliest key or index, plus what applies to every
// child whatever its key.
func (c *costWalk) children(s *jsonschema.Schema, d int) int64 {
	var byKey int64
	for _, p := range s.Properties {
		byKey = max(byKey, c.cost(p, d))
	}
	obj := byKey
	for _, p := range s.PatternProperties {
		obj = add(obj, c.cost(p, d))
	}
	if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		obj = add(obj, c.cost(a, d))
	}
	obj = add(obj, c.cost(s.PropertyNames, d))
	obj = add(obj, c.cost(s.UnevaluatedProperties, d))

	var byIndex int64
	for _, p := range s.PrefixItems {
		byIndex = max(byIndex, c.cost(p, d))
	}
	if items, ok := s.Items.([]*jsonschema.Schema); ok {
		for _, p := range items {
			byIndex = max(byIndex, c.cost(p, d))
		}
	}
	arr := byIndex
	if it, ok := s.Items.(*jsonschema.Schema); ok {
		arr = add(arr, c.cost(it, d))
	}
	if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		arr = add(arr, c.cost(a, d))
	}
	arr = add(arr, c.cost(s.Items2020, d))
	arr = add(arr, c.cost(s.Contains, d))
	arr = add(arr, c.cost(s.UnevaluatedItems, d))
	return add(max(obj, arr), c.cost(s.ContentSchema, d))
}

// inPlace lists the subschemas s applies to the same value.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	subs := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		subs = append(subs, s.DynamicRef.Ref)
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	for _, d := range s.DependentSchemas {
		subs = append(subs, d)
	}
	for _, d := range s.Dependencies {
		if ds, ok := d.(*jsonschema.Schema); ok {
			subs = append(subs, ds)
		}
	}
	return subs
}

// patterns refuses a regular expression past MaxSchemaPatternBytes
// anywhere in the schema.
func (c *costWalk) patterns(s *jsonschema.Schema) error {
	if s == nil || c.seen[s] {
		return nil
	}
	c.seen[s] = true
	if s.Pattern != nil {
		if n := len(s.Pattern.String()); n > MaxSchemaPatternBytes {
			return fmt.Errorf("the pattern at %s is %d bytes, more than the limit of %d", where(s), n, MaxSchemaPatternBytes)
		} else {
			c.patternBytes += int64(n)
		}
	}
	for re := range s.PatternProperties {
		if n := len(re.String()); n > MaxSchemaPatternBytes {
			return fmt.Errorf("a patternProperties key at %s is %d bytes, more than the limit of %d", where(s), n, MaxSchemaPatternBytes)
		} else {
			c.patternBytes += int64(n)
		}
	}
	var all []*jsonschema.Schema
	all = append(all, inPlace(s)...)
	for _, p := range s.Properties {
		all = append(all, p)
	}
	for _, p := range s.PatternProperties {
		all = append(all, p)
	}
	if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		all = append(all, a)
	}
	if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		all = append(all, a)
	}
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		all = append(all, it)
	case []*jsonschema.Schema:
		all = append(all, it...)
	}
	all = append(all, s.PrefixItems...)
	all = append(all, s.PropertyNames, s.UnevaluatedProperties, s.Items2020, s.Contains, s.UnevaluatedItems, s.ContentSchema)
	for _, sub := range all {
		if err := c.patterns(sub); err != nil {
			return err
		}
	}
	return nil
}

// where names a subschema by its JSON pointer in the flow's schema.
func where(s *jsonschema.Schema) string {
	if s == nil {
		return "the schema"
	}
	_, ptr, _ := strings.Cut(s.Location, "#")
	if ptr == "" {
		return "the schema's root"
	}
	return quoteSchemaPath(ptr)
}

func quoteSchemaPath(ptr string) string { return fmt.Sprintf("%q", ptr) }

func add(a, b int64) int64 { return min(a+b, over) }
