package httpapi

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/api"
)

// The API's contract, api/openapi.yaml, served twice: as it is at /api/openapi.yaml for
// machines, and rendered into one HTML page at /api/docs for people. Both are made once and
// answered from memory; neither is in the contract itself (openapi_test.go's outsideSpec).

// apiDocsTemplate is the page's template. It loads nothing but /static/apidocs.css: no script,
// no inline style (pageCSP allows neither), nothing from another origin.
//
//go:embed apidocs.html
var apiDocsTemplate string

// apiDocs are the contract's two answers.
type apiDocs struct {
	spec, page tagged
}

// The contract's media types: YAML's of RFC 9512, and the page's.
var (
	yamlContentType = []string{"application/yaml"}
	htmlContentType = []string{"text/html; charset=utf-8"}
)

// contractDocs makes the answers of the spec in the binary, once per process: loading it takes
// tens of milliseconds, and the tests build routers by the hundred.
var contractDocs = sync.OnceValues(func() (*apiDocs, error) { return newAPIDocs(api.OpenAPI()) })

// newAPIDocs loads and validates spec and renders its page. A spec that does not load or
// validate is an error: New fails, rather than a page failing later.
func newAPIDocs(spec []byte) (*apiDocs, error) {
	loader := openapi3.NewLoader()
	// The operations are listed in the spec's order, which only their origin (line) keeps.
	loader.IncludeOrigin = true
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("httpapi: loading api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("httpapi: api/openapi.yaml does not validate: %w", err)
	}
	tmpl, err := template.New("apidocs").Parse(apiDocsTemplate)
	if err != nil {
		return nil, fmt.Errorf("httpapi: the API docs' template: %w", err)
	}
	var page bytes.Buffer
	if err := tmpl.Execute(&page, toDocsPage(doc)); err != nil {
		return nil, fmt.Errorf("httpapi: rendering the API docs: %w", err)
	}
	return &apiDocs{spec: newTagged(spec), page: newTagged(page.Bytes())}, nil
}

// serveSpec answers the spec's bytes. Kept, but checked (ETag) before each use, as the
// storefront's files are: a new release's contract is seen at once.
func (d *apiDocs) serveSpec(c *gin.Context) {
	c.Writer.Header()["Cache-Control"] = revalidate
	serveTagged(c, &d.spec, yamlContentType)
}

// servePage answers the page under the page's security policy, as the storefront's files are.
func (d *apiDocs) servePage(c *gin.Context) {
	h := c.Writer.Header()
	h["Content-Security-Policy"] = pageCSP
	h["X-Frame-Options"] = frameDeny
	h["Cache-Control"] = revalidate
	serveTagged(c, &d.page, htmlContentType)
}

// docsPage is what the template renders: the spec's title and description, then its
// operations, tag by tag.
type docsPage struct {
	Title, Version, Summary string
	Description             []docsBlock
	Tags                    []*docsTag
}

type docsTag struct {
	Name        string
	Description []docsBlock
	Operations  []docsOperation
}

type docsOperation struct {
	ID, Method, Path, Summary string
	Description               []docsBlock
	// Auth names the security schemes, one of which the operation needs ("none" for none).
	Auth       []string
	Parameters []docsParameter
	// Body is the request body's schema, by media type; BodyRequired says it must be sent.
	Body         []docsSchema
	BodyRequired bool
	Responses    []docsResponse
	// line is where the spec has it; tags, its tags.
	line int
	tags []string
}

type docsParameter struct {
	Name, In    string
	Required    bool
	Description []docsBlock
}

type docsResponse struct {
	Status      string
	Description []docsBlock
	Schemas     []docsSchema
	// Codes are the error codes an error answer's body may carry.
	Codes []string
}

type docsSchema struct{ MediaType, Name string }

// toDocsPage reads doc into the page's shape: the tags in the spec's order (a tag that only
// operations name comes after those), the operations of each in the spec's order.
func toDocsPage(doc *openapi3.T) docsPage {
	p := docsPage{Title: doc.Info.Title, Version: doc.Info.Version, Summary: doc.Info.Summary, Description: prose(doc.Info.Description)}
	byName := map[string]*docsTag{}
	tag := func(name string) *docsTag {
		if t, ok := byName[name]; ok {
			return t
		}
		t := &docsTag{Name: name}
		byName[name] = t
		p.Tags = append(p.Tags, t)
		return t
	}
	for _, t := range doc.Tags {
		tag(t.Name).Description = prose(t.Description)
	}
	var ops []docsOperation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, toDocsOperation(doc, path, method, item, op))
		}
	}
	slices.SortFunc(ops, func(a, b docsOperation) int {
		return cmp.Or(cmp.Compare(a.line, b.line), strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	for _, op := range ops {
		names := op.tags
		if len(names) == 0 {
			names = []string{"other"}
		}
		for _, name := range names {
			t := tag(name)
			t.Operations = append(t.Operations, op)
		}
	}
	p.Tags = slices.DeleteFunc(p.Tags, func(t *docsTag) bool { return len(t.Operations) == 0 })
	return p
}

// toDocsOperation reads one operation of doc, the method of path's item.
func toDocsOperation(doc *openapi3.T, path, method string, item *openapi3.PathItem, op *openapi3.Operation) docsOperation {
	o := docsOperation{ID: op.OperationID, Method: strings.ToUpper(method), Path: path, Summary: op.Summary, Description: prose(op.Description),
		tags: op.Tags}
	if op.Origin != nil && op.Origin.Key != nil {
		o.line = op.Origin.Key.Line
	}
	security := doc.Security
	if op.Security != nil {
		security = *op.Security
	}
	for _, req := range security {
		if len(req) == 0 {
			o.Auth = append(o.Auth, "none")
		}
		o.Auth = append(o.Auth, slices.Sorted(maps.Keys(req))...)
	}
	// The path's parameters, then the operation's; one of the operation's replaces the path's
	// of the same name and place.
	var params openapi3.Parameters
	for _, p := range item.Parameters {
		if p.Value != nil && op.Parameters.GetByInAndName(p.Value.In, p.Value.Name) == nil {
			params = append(params, p)
		}
	}
	for _, p := range append(params, op.Parameters...) {
		if p.Value == nil {
			continue
		}
		o.Parameters = append(o.Parameters, docsParameter{Name: p.Value.Name, In: p.Value.In, Required: p.Value.Required,
			Description: prose(cmp.Or(p.Value.Description, schemaDescription(p.Value.Schema)))})
	}
	if b := op.RequestBody; b != nil && b.Value != nil {
		o.Body, o.BodyRequired = contentSchemas(b.Value.Content), b.Value.Required
	}
	if op.Responses != nil {
		for _, status := range slices.Sorted(maps.Keys(op.Responses.Map())) {
			r := op.Responses.Value(status)
			if r == nil || r.Value == nil {
				continue
			}
			resp := docsResponse{Status: status, Schemas: contentSchemas(r.Value.Content)}
			if r.Value.Description != nil {
				resp.Description = prose(*r.Value.Description)
			}
			if mt := r.Value.Content.Get("application/json"); mt != nil {
				resp.Codes = errorCodes(mt.Schema)
			}
			o.Responses = append(o.Responses, resp)
		}
	}
	return o
}

// contentSchemas names the schema of each media type of c, sorted by media type.
func contentSchemas(c openapi3.Content) []docsSchema {
	var out []docsSchema
	for _, mediaType := range slices.Sorted(maps.Keys(c)) {
		out = append(out, docsSchema{MediaType: mediaType, Name: schemaName(c[mediaType].Schema, true)})
	}
	return out
}

// schemaName names s for people: a component by its name (the last element of its $ref), an
// array by its items', the error answers' allOf by its first member (Error), an inline object
// by its properties' names and schemas when expand is set (one level deep: a property's own
// inline object is just "object"), a constant by its value, anything else by its type.
func schemaName(s *openapi3.SchemaRef, expand bool) string {
	switch {
	case s == nil:
		return ""
	case s.Ref != "":
		return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
	case s.Value == nil:
		return ""
	case len(s.Value.AllOf) > 0:
		return schemaName(s.Value.AllOf[0], expand)
	case s.Value.Type.Is("array") && s.Value.Items != nil:
		return "array of " + cmp.Or(schemaName(s.Value.Items, false), "items")
	case s.Value.Type.Is("object") && len(s.Value.Properties) > 0 && expand:
		var fields []string
		for _, name := range slices.Sorted(maps.Keys(s.Value.Properties)) {
			fields = append(fields, name+": "+cmp.Or(schemaName(s.Value.Properties[name], false), "any"))
		}
		return "object {" + strings.Join(fields, ", ") + "}"
	case s.Value.Const != nil:
		if c, ok := s.Value.Const.(string); ok {
			return strconv.Quote(c)
		}
		return fmt.Sprint(s.Value.Const)
	}
	if s.Value.Type == nil {
		return ""
	}
	return strings.Join(s.Value.Type.Slice(), " or ")
}

// schemaDescription is the description of a parameter's schema, for a parameter without its
// own: a component's (ProductID's spelling) says what the parameter is.
func schemaDescription(s *openapi3.SchemaRef) string {
	if s == nil || s.Value == nil {
		return ""
	}
	return s.Value.Description
}

// errorCodes reads the error codes that an error answer's schema allows: the enum (or const)
// of error.code where the schema restricts it, through allOf. The unrestricted ErrorCode of
// the Error component, a $ref, is not a restriction.
func errorCodes(s *openapi3.SchemaRef) []string {
	var codes []string
	for _, e := range property(s, "error") {
		for _, c := range property(e, "code") {
			if c.Ref != "" || c.Value == nil {
				continue
			}
			for _, v := range c.Value.Enum {
				codes = append(codes, fmt.Sprint(v))
			}
			if c.Value.Const != nil {
				codes = append(codes, fmt.Sprint(c.Value.Const))
			}
		}
	}
	return codes
}

// property returns the schemas that s gives its property name: its own and its allOf
// members'.
func property(s *openapi3.SchemaRef, name string) []*openapi3.SchemaRef {
	if s == nil || s.Value == nil {
		return nil
	}
	var out []*openapi3.SchemaRef
	if p := s.Value.Properties[name]; p != nil {
		out = append(out, p)
	}
	for _, m := range s.Value.AllOf {
		out = append(out, property(m, name)...)
	}
	return out
}

// docsBlock is a paragraph, or a list when Items is set.
type docsBlock struct {
	Text  []docsSpan
	Items [][]docsSpan
}

// docsSpan is a piece of text, in code type when Code is set.
type docsSpan struct {
	Text string
	Code bool
}

// prose reads the spec's Markdown as far as its descriptions use it: paragraphs split by blank
// lines, lists of "- " items, and `code`. Anything else stays as written, escaped by the
// template like all the spec's text.
func prose(s string) []docsBlock {
	var out []docsBlock
	for para := range strings.SplitSeq(strings.TrimSpace(s), "\n\n") {
		para = strings.TrimSpace(para)
		if para == "" {
			continue
		}
		if !strings.HasPrefix(para, "- ") {
			out = append(out, docsBlock{Text: spans(para)})
			continue
		}
		var b docsBlock
		for item := range strings.SplitSeq(para[2:], "\n- ") {
			b.Items = append(b.Items, spans(item))
		}
		out = append(out, b)
	}
	return out
}

// spans splits s at its backticks: every other piece is code.
func spans(s string) []docsSpan {
	var out []docsSpan
	for i, piece := range strings.Split(s, "`") {
		if piece != "" {
			out = append(out, docsSpan{Text: piece, Code: i%2 == 1})
		}
	}
	return out
}
