package mcp

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What the proxy adds to what the upstream says: the capabilities its
// read-back tool and toolcas:// resources need, the tool itself at the end
// of the tool list, and the resource template at the end of the template
// list. Anything else of the upstream's answers passes as it came.

// initResult adds, to the upstream's answer to initialize (or to
// server/discover), the tools and resources capabilities when it lacks
// them, and notes what it has.
func (l *link) initResult(m *message) *message {
	if m.pieces != nil {
		return m
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(m.env.Result, &res) != nil {
		return m
	}
	var caps map[string]json.RawMessage
	json.Unmarshal(res["capabilities"], &caps)
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var version string
	json.Unmarshal(res["protocolVersion"], &version)
	l.mu.Lock()
	l.version = version
	l.upTools, l.upCaps = map[string]bool{}, upCaps{known: true, tools: caps["tools"] != nil, resources: caps["resources"] != nil}
	l.mu.Unlock()
	if caps["tools"] != nil && caps["resources"] != nil {
		return m
	}
	for _, k := range []string{"tools", "resources"} {
		if caps[k] == nil {
			caps[k] = json.RawMessage(`{}`)
		}
	}
	res["capabilities"], _ = json.Marshal(caps)
	out := resultReply(m.env.ID, res)
	m.release()
	return out
}

// upCaps are the features the upstream said it has.
type upCaps struct{ known, tools, resources bool }

// toolList notes the upstream's tool names and, on the last page, adds the
// read-back tool, under a name the upstream does not use.
func (l *link) toolList(m *message, c *call) *message {
	if m.pieces != nil {
		return m
	}
	var res map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(m.env.Result, &res) != nil || json.Unmarshal(res["tools"], &tools) != nil {
		return m
	}
	l.mu.Lock()
	if !c.cursor {
		l.upTools = map[string]bool{}
	}
	for _, t := range tools {
		var named struct{ Name string }
		if json.Unmarshal(t, &named) == nil {
			l.upTools[named.Name] = true
		}
	}
	last := len(res["nextCursor"]) == 0 || string(res["nextCursor"]) == "null"
	old := l.readName
	if last {
		l.readName = freeReadName(l.upTools)
	}
	name := l.readName
	l.mu.Unlock()
	if !last {
		return m
	}
	if name != old {
		l.p.log.Warn(fmt.Sprintf("toolcas: upstream %s has a tool named %s: the read-back tool is now %s", l.p.up, old, name))
	}
	l.p.setReadName(name)
	def, err := json.Marshal(l.p.rd.toolDef(name))
	if err != nil {
		return m
	}
	res["tools"], _ = json.Marshal(append(tools, def))
	out := resultReply(m.env.ID, res)
	m.release()
	return out
}

// freeReadName returns the first read-back tool name the upstream does not
// use.
func freeReadName(upstream map[string]bool) string {
	if !upstream[ReadToolName] {
		return ReadToolName
	}
	for i := 1; ; i++ {
		name := "toolcas_" + ReadToolName
		if i > 1 {
			name = fmt.Sprintf("%s_%d", name, i)
		}
		if !upstream[name] {
			return name
		}
	}
}

// templateList adds the toolcas:// template on the last page.
func (l *link) templateList(m *message, c *call) *message {
	if m.pieces != nil {
		return m
	}
	var res map[string]json.RawMessage
	var list []json.RawMessage
	if json.Unmarshal(m.env.Result, &res) != nil || json.Unmarshal(res["resourceTemplates"], &list) != nil {
		return m
	}
	if len(res["nextCursor"]) > 0 && string(res["nextCursor"]) != "null" {
		return m
	}
	def, _ := json.Marshal(resourceTemplate())
	res["resourceTemplates"], _ = json.Marshal(append(list, def))
	out := resultReply(m.env.ID, res)
	m.release()
	return out
}

// localList answers a list request the upstream cannot, having no such
// feature: tools/list with the read-back tool alone, resources/templates/list
// with the toolcas:// template alone, resources/list with nothing.
func (l *link) localList(method string) (any, bool) {
	l.mu.Lock()
	caps, name := l.upCaps, l.readName
	l.mu.Unlock()
	if !caps.known {
		return nil, false
	}
	switch {
	case method == "tools/list" && !caps.tools:
		return map[string]any{"tools": []any{l.p.rd.toolDef(name)}}, true
	case method == "resources/templates/list" && !caps.resources:
		return map[string]any{"resourceTemplates": []any{resourceTemplate()}}, true
	case method == "resources/list" && !caps.resources:
		return map[string]any{"resources": []any{}}, true
	}
	return nil, false
}

// readTool answers a call of the read-back tool from the store.
func (l *link) readTool(m *message, c *call) {
	defer m.release()
	res := l.p.rd.call(l.ctx, l.run, c.args)
	l.reply(resultReply(c.id, res))
}

// readResource answers resources/read of a toolcas:// URI from the store.
func (l *link) readResource(m *message, uri string) {
	defer m.release()
	l.mu.Lock()
	name := l.readName
	l.mu.Unlock()
	res, err := l.p.rd.readResourceFor(l.ctx, l.run, uri, name)
	if err != nil {
		var werr *jsonrpc.Error
		if errors.As(err, &werr) {
			l.reply(errorReply(m.env.ID, int(werr.Code), werr.Message))
			return
		}
		l.reply(errorReply(m.env.ID, codeInternal, err.Error()))
		return
	}
	l.reply(resultReply(m.env.ID, res))
}
