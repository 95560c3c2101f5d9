package grafana

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// provisioningFiles are the InfluxDB data sources of the compose stacks:
// 1.8, 2.x and 3.x.
var provisioningFiles = []string{"provisioning/datasources/influxdb.yaml", "provisioning-influxdb2/datasources/influxdb.yaml", "provisioning-influxdb3/datasources/influxdb.yaml"}

// The provisioning files give the data source the uid and the name the
// dashboards' data source variable selects by default, and the compose
// stack mounts the dashboards where the provider reads them.
func TestProvisioning(t *testing.T) {
	for _, f := range provisioningFiles {
		var ds struct {
			Datasources []struct {
				Name     string `yaml:"name"`
				UID      string `yaml:"uid"`
				Type     string `yaml:"type"`
				JSONData struct {
					DBName string `yaml:"dbName"`
				} `yaml:"jsonData"`
			} `yaml:"datasources"`
		}
		readYAML(t, f, &ds)
		if len(ds.Datasources) != 1 || ds.Datasources[0].UID != DatasourceUID || ds.Datasources[0].Name != DatasourceName || ds.Datasources[0].Type != "influxdb" ||
			ds.Datasources[0].JSONData.DBName != "spark" {
			t.Errorf("%s: %+v", f, ds)
		}
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "provisioning/dashboards/sparkpulse.yaml", &prov)
	var compose struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	readYAML(t, filepath.Join("..", "docker-compose.yml"), &compose)
	mounts := compose.Services["grafana"].Volumes
	if len(prov.Providers) != 1 || !slices.Contains(mounts, "./grafana/dashboards:"+prov.Providers[0].Options.Path+":ro") ||
		!slices.Contains(mounts, "./grafana/provisioning:/etc/grafana/provisioning:ro") {
		t.Errorf("provider %+v, grafana mounts %q", prov, mounts)
	}
}
