package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncTools mirrors the upstream's tool list: adds what is new or changed,
// removes what is gone, and moves the read-back tool off a name the
// upstream now uses. The SDK tells every client session.
func (p *Proxy) syncTools(ctx context.Context, cs *sdk.ClientSession) error {
	seen := map[string]string{}
	var list []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		b, _ := json.Marshal(t)
		seen[t.Name] = string(b)
		list = append(list, t)
	}
	p.mu.Lock()
	old := maps.Clone(p.tools)
	readName := p.readName
	p.mu.Unlock()
	if _, clash := seen[readName]; clash {
		p.setReadTool(p.freeReadName(seen))
	}
	var gone []string
	for name := range old {
		if _, ok := seen[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		p.server.RemoveTools(gone...)
	}
	var errs []error
	for _, t := range list {
		if old[t.Name] == seen[t.Name] {
			continue
		}
		if err := safely(func() { p.server.AddTool(t, p.callTool) }); err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %v", t.Name, err))
			delete(seen, t.Name)
		}
	}
	p.mu.Lock()
	p.tools = seen
	p.mu.Unlock()
	return errors.Join(errs...)
}

// freeReadName returns the first read-back tool name the upstream does not
// use.
func (p *Proxy) freeReadName(upstream map[string]string) string {
	for i := 1; ; i++ {
		name := "toolcas_" + ReadToolName
		if i > 1 {
			name = fmt.Sprintf("%s_%d", name, i)
		}
		if _, used := upstream[name]; !used {
			return name
		}
	}
}

// setReadTool registers the read-back tool under name, dropping any older
// name.
func (p *Proxy) setReadTool(name string) {
	def, err := p.rd.toolDef(name)
	if err != nil {
		p.log.Error(err.Error())
		return
	}
	p.mu.Lock()
	old := p.readName
	p.readName = name
	p.mu.Unlock()
	p.server.AddTool(def, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s := p.sessionFor(r.Session)
		s.next()
		return p.rd.call(ctx, s.run, r.Params.Arguments), nil
	})
	if old != "" && old != name {
		// The upstream's tool of that name is registered by the caller.
		p.log.Warn(fmt.Sprintf("toolcas: upstream %s has a tool named %s: the read-back tool is now %s", p.up, old, name))
	}
}

// safely runs f, turning a panic (the SDK panics on a malformed tool
// schema or URI template) into an error.
func safely(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	f()
	return nil
}

func (p *Proxy) syncPrompts(ctx context.Context, cs *sdk.ClientSession) error {
	seen := map[string]string{}
	var list []*sdk.Prompt
	for pr, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			return fmt.Errorf("prompts/list: %w", err)
		}
		b, _ := json.Marshal(pr)
		seen[pr.Name] = string(b)
		list = append(list, pr)
	}
	p.mu.Lock()
	old := maps.Clone(p.prompts)
	p.mu.Unlock()
	var gone []string
	for name := range old {
		if _, ok := seen[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		p.server.RemovePrompts(gone...)
	}
	for _, pr := range list {
		if old[pr.Name] != seen[pr.Name] {
			p.server.AddPrompt(pr, p.getPrompt)
		}
	}
	p.mu.Lock()
	p.prompts = seen
	p.mu.Unlock()
	return nil
}

func (p *Proxy) syncResources(ctx context.Context, cs *sdk.ClientSession) error {
	var errs []error
	seen := map[string]string{}
	var list []*sdk.Resource
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			return fmt.Errorf("resources/list: %w", err)
		}
		b, _ := json.Marshal(r)
		seen[r.URI] = string(b)
		list = append(list, r)
	}
	seenT := map[string]string{}
	var listT []*sdk.ResourceTemplate
	for t, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			errs = append(errs, fmt.Errorf("resources/templates/list: %w", err))
			break
		}
		if t.URITemplate == ResourceURITemplate {
			continue
		}
		b, _ := json.Marshal(t)
		seenT[t.URITemplate] = string(b)
		listT = append(listT, t)
	}
	p.mu.Lock()
	old, oldT := maps.Clone(p.resources), maps.Clone(p.templates)
	p.mu.Unlock()
	var gone, goneT []string
	for uri := range old {
		if _, ok := seen[uri]; !ok {
			gone = append(gone, uri)
		}
	}
	for t := range oldT {
		if _, ok := seenT[t]; !ok {
			goneT = append(goneT, t)
		}
	}
	if len(gone) > 0 {
		p.server.RemoveResources(gone...)
	}
	if len(goneT) > 0 {
		p.server.RemoveResourceTemplates(goneT...)
	}
	for _, r := range list {
		if old[r.URI] == seen[r.URI] {
			continue
		}
		if err := safely(func() { p.server.AddResource(r, p.readUpstreamResource) }); err != nil {
			errs = append(errs, fmt.Errorf("resource %q: %v", r.URI, err))
			delete(seen, r.URI)
		}
	}
	for _, t := range listT {
		if oldT[t.URITemplate] == seenT[t.URITemplate] {
			continue
		}
		if err := safely(func() { p.server.AddResourceTemplate(t, p.readUpstreamResource) }); err != nil {
			errs = append(errs, fmt.Errorf("resource template %q: %v", t.URITemplate, err))
			delete(seenT, t.URITemplate)
		}
	}
	p.mu.Lock()
	p.resources, p.templates = seen, seenT
	p.mu.Unlock()
	return errors.Join(errs...)
}

// getPrompt forwards prompts/get.
func (p *Proxy) getPrompt(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	uc, err := p.upstream(ctx)
	if err != nil {
		return nil, err
	}
	params := *req.Params
	params.Meta = forwardMeta(params.Meta)
	res, err := uc.cs.GetPrompt(ctx, &params)
	if err != nil {
		return nil, p.callError(ctx, ctx, uc, fmt.Sprintf("prompts/get %q", req.Params.Name), err)
	}
	return res, nil
}

// readUpstreamResource forwards resources/read of any URI but toolcas://.
func (p *Proxy) readUpstreamResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uc, err := p.upstream(ctx)
	if err != nil {
		return nil, err
	}
	params := *req.Params
	params.Meta = forwardMeta(params.Meta)
	res, err := uc.cs.ReadResource(ctx, &params)
	if err != nil {
		return nil, p.callError(ctx, ctx, uc, fmt.Sprintf("resources/read %q", req.Params.URI), err)
	}
	return res, nil
}

func (p *Proxy) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	if strings.HasPrefix(req.Params.URI, Scheme+"://") {
		return nil // offloaded parts never change
	}
	uc, err := p.upstream(ctx)
	if err != nil {
		return err
	}
	return uc.cs.Subscribe(ctx, req.Params)
}

func (p *Proxy) unsubscribe(ctx context.Context, req *sdk.UnsubscribeRequest) error {
	if strings.HasPrefix(req.Params.URI, Scheme+"://") {
		return nil
	}
	uc, err := p.upstream(ctx)
	if err != nil {
		return err
	}
	return uc.cs.Unsubscribe(ctx, req.Params)
}
