package chat

import "encoding/json"

// RequestSchemaID is the $id of RequestSchema. A tool whose input schema
// carries it declares that it speaks Contract.
const RequestSchemaID = "urn:weir:chat:v1:request"

// RequestSchema is the JSON schema of a Request. A chat tool uses it as
// its input schema: the host then refuses a malformed request before the
// tool sees it, and SpeaksContract recognises the tool as a model.
const RequestSchema = `{
  "$id": "` + RequestSchemaID + `",
  "type": "object",
  "additionalProperties": false,
  "required": ["model", "messages"],
  "properties": {
    "model": {"type": "string", "minLength": 1},
    "system": {"type": "string"},
    "messages": {
      "type": "array", "minItems": 1, "maxItems": 10000,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["role"],
        "properties": {
          "role": {"enum": ["system", "user", "assistant", "tool"]},
          "content": {"type": "string"},
          "tool_calls": {
            "type": "array", "maxItems": 128,
            "items": {
              "type": "object",
              "additionalProperties": false,
              "required": ["id", "name", "arguments"],
              "properties": {
                "id": {"type": "string", "minLength": 1},
                "name": {"type": "string", "minLength": 1},
                "arguments": {"type": "object"}
              }
            }
          },
          "tool_call_id": {"type": "string"},
          "is_error": {"type": "boolean"}
        }
      }
    },
    "tools": {
      "type": "array", "maxItems": 128,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {
          "name": {"type": "string", "minLength": 1},
          "description": {"type": "string"},
          "input_schema": {"type": "object"}
        }
      }
    },
    "max_tokens": {"type": "integer", "minimum": 0},
    "output_schema": {"type": "object"}
  }
}`

// ResponseSchemaID is the $id of ResponseSchema.
const ResponseSchemaID = "urn:weir:chat:v1:response"

// ResponseSchema is the JSON schema of a Response, for a chat tool's
// output schema.
const ResponseSchema = `{
  "$id": "` + ResponseSchemaID + `",
  "type": "object",
  "required": ["message", "stop_reason", "usage", "model"],
  "properties": {
    "message": {"type": "object"},
    "stop_reason": {"enum": ["end_turn", "tool_use", "max_tokens", "refusal", "other"]},
    "usage": {
      "type": "object",
      "required": ["input_tokens", "output_tokens"],
      "properties": {
        "input_tokens": {"type": "integer", "minimum": 0},
        "output_tokens": {"type": "integer", "minimum": 0}
      }
    },
    "usage_estimated": {"type": "boolean"},
    "model": {"type": "string"}
  }
}`

// SpeaksContract reports whether a tool with this input schema declares
// the chat contract: its schema's $id is RequestSchemaID. Registration
// uses it to check that an agent's model tool is a model.
func SpeaksContract(inputSchema string) bool {
	var s struct {
		ID string `json:"$id"`
	}
	return json.Unmarshal([]byte(inputSchema), &s) == nil && s.ID == RequestSchemaID
}
