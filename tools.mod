// Developer tools, pinned with go's tool directive in their own module file so
// their dependencies stay out of go.mod: staticcheck needs golang.org/x/exp/typeparams,
// which in go.mod's graph (goose pulls a 2026 golang.org/x/exp whose zip the module
// proxy refuses) cannot be resolved. Run: go tool -modfile=tools.mod staticcheck ./...
// Update: go get -tool -modfile=tools.mod honnef.co/go/tools/cmd/staticcheck@VERSION
//
// oapi-codegen generates api/client from the contract (go generate ./api/client; its
// fresh_test.go runs this pinned version). Update: go get -tool -modfile=tools.mod
// github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@VERSION, then go generate
// ./api/client; the generated code's runtime, github.com/oapi-codegen/runtime, is in go.mod.
module github.com/seckill-go/seckill-go

go 1.26.8

tool (
	github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen
	honnef.co/go/tools/cmd/staticcheck
)

require (
	github.com/BurntSushi/toml v1.4.1-0.20240526193622-a339e1f7089c // indirect
	github.com/dprotaso/go-yit v0.0.0-20220510233725-9ba8df137936 // indirect
	github.com/getkin/kin-openapi v0.142.0 // indirect
	github.com/go-openapi/jsonpointer v0.23.1 // indirect
	github.com/go-openapi/swag/jsonname v0.26.0 // indirect
	github.com/oapi-codegen/oapi-codegen/v2 v2.8.2 // indirect
	github.com/oasdiff/yaml v0.1.1 // indirect
	github.com/oasdiff/yaml3 v0.0.14 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2 // indirect
	github.com/speakeasy-api/jsonpath v0.6.3 // indirect
	github.com/speakeasy-api/openapi v1.24.0 // indirect
	github.com/vmware-labs/yaml-jsonpath v0.3.2 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/exp/typeparams v0.0.0-20231108232855-2478ac86f678 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)
