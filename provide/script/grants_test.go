package script_test

import (
	"errors"
	"testing"
	"time"

	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/script"
)

func TestGrantsValidate(t *testing.T) {
	tests := []struct {
		name  string
		g     script.Grants
		field string // "" when valid
	}{
		{name: "zero means defaults", g: script.Grants{}},
		{name: "all set", g: script.Grants{Timeout: 30 * time.Second, MaxScriptBytes: 64 << 10, MaxArgsBytes: 32 << 10, MaxResultBytes: 1, MaxMemoryBytes: 4 << 20}},
		{name: "small budget, default args", g: script.Grants{MaxMemoryBytes: 4 << 20}},
		{name: "negative timeout", g: script.Grants{Timeout: -1}, field: "timeout"},
		{name: "timeout too long", g: script.Grants{Timeout: 31 * time.Second}, field: "timeout"},
		{name: "negative script size", g: script.Grants{MaxScriptBytes: -1}, field: "max_script_bytes"},
		{name: "script size too large", g: script.Grants{MaxScriptBytes: 64<<10 + 1}, field: "max_script_bytes"},
		{name: "negative args size", g: script.Grants{MaxArgsBytes: -5}, field: "max_args_bytes"},
		{name: "args size too large for the default budget", g: script.Grants{MaxArgsBytes: 1<<20 + 1}, field: "max_args_bytes"},
		{name: "args size too large for the budget", g: script.Grants{MaxArgsBytes: 64 << 10, MaxMemoryBytes: 4 << 20}, field: "max_args_bytes"},
		{name: "negative result size", g: script.Grants{MaxResultBytes: -1}, field: "max_result_bytes"},
		{name: "result size too large", g: script.Grants{MaxResultBytes: 1 << 30}, field: "max_result_bytes"},
		{name: "negative memory", g: script.Grants{MaxMemoryBytes: -1}, field: "max_memory_bytes"},
		{name: "memory too small", g: script.Grants{MaxMemoryBytes: 1 << 20}, field: "max_memory_bytes"},
		{name: "memory too large", g: script.Grants{MaxMemoryBytes: 128<<20 + 1}, field: "max_memory_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *grant.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *grant.FieldError for %s", err, tc.field)
			}
			if fe.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Run("invalid grants", func(t *testing.T) {
		_, err := script.New(script.Grants{Timeout: -1}, nil)
		var fe *grant.FieldError
		if !errors.As(err, &fe) || fe.Field != "timeout" {
			t.Fatalf("New = %v, want a wrapped *grant.FieldError for timeout", err)
		}
	})
	t.Run("negative MaxConcurrent", func(t *testing.T) {
		if _, err := script.New(script.Grants{}, &script.Options{MaxConcurrent: -1}); err == nil {
			t.Fatal("New accepted MaxConcurrent -1")
		}
	})
}
