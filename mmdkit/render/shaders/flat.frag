// Flat-colour passes: edges (outline) and MMD's ground shadow.
uniform vec4 u_color;
out vec4 f_color;

void main() {
    f_color = u_color;
}
