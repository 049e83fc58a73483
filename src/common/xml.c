/* xml.c — element walking over libxml2 (see xml.h). No state. */
#include "common/xml.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

xmlDoc *drv_xml_parse(const char *xml, size_t len, size_t max)
{
    if (!xml || len > max || len > (size_t)INT32_MAX)
        return NULL;
    return xmlReadMemory(xml, (int)len, "answer.xml", NULL,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

bool drv_xml_named(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

const xmlNode *drv_xml_child(const xmlNode *n, const char *name)
{
    for (const xmlNode *c = n ? n->children : NULL; c; c = c->next)
        if (drv_xml_named(c, name))
            return c;
    return NULL;
}

const xmlNode *drv_xml_find(const xmlNode *n, const char *name)
{
    for (; n; n = n->next) {
        if (drv_xml_named(n, name))
            return n;
        const xmlNode *f = drv_xml_find(n->children, name);
        if (f)
            return f;
    }
    return NULL;
}

void drv_xml_text(const xmlNode *n, char *out, size_t len)
{
    out[0] = '\0';
    xmlChar *t = n ? xmlNodeGetContent(n) : NULL;
    if (t) {
        snprintf(out, len, "%s", (const char *)t);
        xmlFree(t);
    }
}
