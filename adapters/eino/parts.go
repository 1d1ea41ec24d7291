package toolcaseino

import (
	"encoding/base64"
	"fmt"

	"github.com/cloudwego/eino/schema"

	"github.com/toolcas/toolcas/hook"
)

// partsOf turns eino's result parts into the hook's. ok is false when a
// part carries nothing to store (an image given by URL only, a tool search
// result): such a result stays as the tool returned it.
func partsOf(res *schema.ToolResult) (parts []hook.Part, ok bool, err error) {
	for i, p := range res.Parts {
		switch p.Type {
		case schema.ToolPartTypeText:
			parts = append(parts, hook.Text(p.Text))
			continue
		case schema.ToolPartTypeImage, schema.ToolPartTypeAudio, schema.ToolPartTypeVideo, schema.ToolPartTypeFile:
		default:
			return nil, false, nil
		}
		c := common(p)
		if c == nil || c.Base64Data == nil {
			return nil, false, nil
		}
		data, err := base64.StdEncoding.DecodeString(*c.Base64Data)
		if err != nil {
			return nil, false, fmt.Errorf("part %d (%s): payload is not valid base64: %w", i, p.Type, err)
		}
		if p.Type == schema.ToolPartTypeImage {
			parts = append(parts, hook.Image(c.MIMEType, data))
		} else {
			parts = append(parts, hook.File(c.MIMEType, "", data))
		}
	}
	return parts, len(parts) > 0, nil
}

func common(p schema.ToolOutputPart) *schema.MessagePartCommon {
	switch {
	case p.Type == schema.ToolPartTypeImage && p.Image != nil:
		return &p.Image.MessagePartCommon
	case p.Type == schema.ToolPartTypeAudio && p.Audio != nil:
		return &p.Audio.MessagePartCommon
	case p.Type == schema.ToolPartTypeVideo && p.Video != nil:
		return &p.Video.MessagePartCommon
	case p.Type == schema.ToolPartTypeFile && p.File != nil:
		return &p.File.MessagePartCommon
	}
	return nil
}

// toolResultOf turns the hook's parts (a pointer, or what the read-back
// tool returns) into eino's.
func toolResultOf(parts []hook.Part) *schema.ToolResult {
	res := &schema.ToolResult{}
	for _, p := range parts {
		switch p.Kind {
		case hook.KindText:
			res.Parts = append(res.Parts, schema.ToolOutputPart{Type: schema.ToolPartTypeText, Text: p.Text})
		case hook.KindImage:
			b64 := base64.StdEncoding.EncodeToString(p.Data)
			res.Parts = append(res.Parts, schema.ToolOutputPart{Type: schema.ToolPartTypeImage,
				Image: &schema.ToolOutputImage{MessagePartCommon: schema.MessagePartCommon{Base64Data: &b64, MIMEType: p.MIME}}})
		default:
			b64 := base64.StdEncoding.EncodeToString(p.Data)
			res.Parts = append(res.Parts, schema.ToolOutputPart{Type: schema.ToolPartTypeFile,
				File: &schema.ToolOutputFile{MessagePartCommon: schema.MessagePartCommon{Base64Data: &b64, MIMEType: p.MIME}}})
		}
	}
	return res
}
